// mailwatch dashboard: a little vanilla JavaScript, no dependencies.
// Times arrive as <time datetime="RFC 3339"> in UTC and are shown in the
// viewer's zone; the events and receiver pages update themselves.
"use strict";
(function () {
  var fmt = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });
  var fmtSeconds = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "medium" });
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      var d = new Date(t.getAttribute("datetime"));
      if (!isNaN(d)) { t.textContent = (t.hasAttribute("data-seconds") ? fmtSeconds : fmt).format(d); t.title = t.getAttribute("datetime"); }
    });
  }
  function timeEl(iso) {
    var t = document.createElement("time");
    t.setAttribute("datetime", iso);
    t.textContent = iso;
    return t;
  }
  function status(text) { var s = document.getElementById("live-status"); if (s) s.textContent = text; }
  var csrf = document.body.getAttribute("data-csrf");
  function get(url) {
    return fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json", "X-CSRF-Token": csrf } });
  }

  // Label each cell with its column's header, for the stacked rows that
  // tables become on narrow screens (app.css).
  function labelCells(root) {
    root.querySelectorAll("table.list").forEach(function (table) {
      var heads = Array.prototype.map.call(table.querySelectorAll("thead th"), function (th) { return th.textContent.trim(); });
      table.querySelectorAll("tbody tr").forEach(function (tr) {
        Array.prototype.forEach.call(tr.children, function (cell, i) {
          if (cell.tagName === "TD" && heads[i] && !cell.hasAttribute("data-label")) cell.setAttribute("data-label", heads[i]);
        });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    localTimes(document);
    labelCells(document);
    // A form with a kind select shows only the chosen kind's fields
    // (without script, all of them show, and the others are ignored).
    document.querySelectorAll("select[data-kinds]").forEach(function (sel) {
      var form = sel.form;
      var show = function () {
        form.querySelectorAll("fieldset[data-kind]").forEach(function (f) {
          f.hidden = f.getAttribute("data-kind") !== sel.value;
          f.disabled = f.hidden;
        });
        form.querySelectorAll("[data-kinds-hint]").forEach(function (h) { h.hidden = true; });
      };
      sel.addEventListener("change", show);
      show();
    });
    // A page waiting for something (a new domain's first check) reloads
    // itself every 3 s until it is there, for at most 2 minutes.
    var waiting = document.querySelector("[data-refresh]");
    if (waiting) {
      var key = "mw-refresh:" + location.pathname + ":" + waiting.getAttribute("data-refresh");
      var n = Number(sessionStorage.getItem(key) || 0);
      if (n < 40) {
        sessionStorage.setItem(key, String(n + 1));
        setTimeout(function () { location.reload(); }, 3000);
      }
    }
    // A search box that narrows a list of choices (data-filter: their selector);
    // a group left with no match is hidden too. Checked choices stay visible.
    document.querySelectorAll("input[data-filter]").forEach(function (box) {
      box.addEventListener("input", function () {
        var q = box.value.trim().toLowerCase();
        document.querySelectorAll(box.getAttribute("data-filter")).forEach(function (el) {
          var input = el.querySelector("input");
          el.hidden = q !== "" && el.textContent.toLowerCase().indexOf(q) < 0 && !(input && input.checked);
        });
        document.querySelectorAll(".type-group").forEach(function (g) {
          g.hidden = !g.querySelector("label:not([hidden])");
        });
      });
    });
    // The alert an alert mail links to (/alerts?event=<id>): into view.
    var target = document.querySelector("article.alert.target");
    if (target) { target.scrollIntoView({ block: "center" }); target.focus({ preventScroll: true }); }
    document.querySelectorAll("[data-select]").forEach(function (i) {
      i.addEventListener("focus", function () { i.select(); });
    });

    // Events: poll the session's JSON feed for events newer than the newest shown.
    var list = document.getElementById("events");
    if (list) {
      var newest = list.getAttribute("data-newest");
      var type = list.getAttribute("data-type");
      var tick = function () {
        var q = "?order=asc&limit=200&since=" + encodeURIComponent(newest) + (type ? "&event_type=" + encodeURIComponent(type) : "");
        get(list.getAttribute("data-feed") + q).then(function (r) { return r.ok ? r.json() : []; }).then(function (items) {
          items.forEach(function (e) {
            // The server renders the item with the page's template (escaped).
            var tpl = document.createElement("template");
            tpl.innerHTML = e.html.trim();
            var li = tpl.content.firstElementChild;
            if (!li) return;
            li.classList.add("fresh");
            list.insertBefore(li, list.firstChild);
            localTimes(li);
            newest = e.created_at;
          });
          if (items.length) status(items.length + " new event(s).");
        }).catch(function () {}).finally(function () { setTimeout(tick, 3000); });
      };
      setTimeout(tick, 3000);
    }

    // Receiver: long-poll the wait feed; each answer is the next message.
    var msgs = document.getElementById("messages");
    if (msgs) {
      var after = msgs.getAttribute("data-after");
      var rid = msgs.getAttribute("data-receiver");
      var wait = function () {
        get(msgs.getAttribute("data-wait") + (after ? "?after=" + encodeURIComponent(after) : "")).then(function (r) {
          if (r.status === 200) {
            return r.json().then(function (m) {
              var li = document.createElement("li");
              li.className = "fresh";
              var a = document.createElement("a");
              a.href = "/receivers/" + rid + "/messages/" + m.id;
              a.textContent = m.subject || "(no subject)";
              li.append(a, " from " + ((m.from && m.from.address) || m.sender) + " · ", timeEl(m.received_at));
              if (m.codes && m.codes.length) {
                var code = document.createElement("strong"); code.className = "code"; code.textContent = m.codes[0];
                li.append(" · code ", code);
              }
              msgs.insertBefore(li, msgs.firstChild);
              localTimes(li);
              after = m.id;
              status("New message: " + (m.subject || "(no subject)"));
              wait();
            });
          }
          if (r.status === 204 || r.status === 503) { wait(); return; }
          status(r.status === 410 ? "This receiver has expired." : "Live updates stopped (" + r.status + "); reload the page.");
        }).catch(function () { setTimeout(wait, 3000); });
      };
      wait();
    }
  });
})();
