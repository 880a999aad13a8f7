// Package sendermap names the service behind a source IP from its reverse
// DNS name, with parsedmarc's map of reverse-DNS base domains to sending
// services (see NOTICE for its origin and licence).
//
// The base domain of a name is its registrable domain under the public
// suffix list, unless a parsedmarc override (a suffix the list does not
// know as one, e.g. a hosting provider's customer zones) ends the name.
package sendermap

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/csv"
	"io"
	"strings"
	"sync"

	"golang.org/x/net/publicsuffix"
)

//go:embed base_reverse_dns_map.csv
var mapCSV []byte

//go:embed psl_overrides.txt
var overridesTxt []byte

// Sender is a known sending service.
type Sender struct {
	// Name is the service, e.g. "Amazon SES".
	Name string `json:"name"`
	// Type is parsedmarc's category, e.g. "SaaS", "ISP", "Email Provider".
	Type string `json:"type"`
}

type tables struct {
	senders map[string]Sender
	// overrides by their last label, each list in the file's order: a
	// name can only end with an override of its own last label (every
	// override holds a dot), and a read names up to thousands of PTRs.
	overrides map[string][]string
}

var load = sync.OnceValue(func() *tables {
	t := &tables{senders: make(map[string]Sender, 40000), overrides: map[string][]string{}}
	r := csv.NewReader(bytes.NewReader(mapCSV))
	r.FieldsPerRecord = -1
	first := true
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil || len(rec) < 3 {
			continue
		}
		if first {
			first = false
			if rec[0] == "base_reverse_dns" {
				continue
			}
		}
		t.senders[strings.ToLower(strings.TrimSpace(rec[0]))] = Sender{Name: strings.TrimSpace(rec[1]), Type: strings.TrimSpace(rec[2])}
	}
	sc := bufio.NewScanner(bytes.NewReader(overridesTxt))
	for sc.Scan() {
		if line := strings.ToLower(strings.TrimSpace(sc.Text())); line != "" && !strings.HasPrefix(line, "#") {
			last := lastLabel(line)
			t.overrides[last] = append(t.overrides[last], line)
		}
	}
	return t
})

// BaseDomain returns the base domain of a reverse DNS name.
func BaseDomain(ptr string) string {
	name := strings.TrimSuffix(strings.ToLower(strings.TrimSpace(ptr)), ".")
	if name == "" {
		return ""
	}
	for _, o := range load().overrides[lastLabel(name)] {
		if strings.HasSuffix(name, o) {
			return strings.Trim(o, ".-")
		}
	}
	base, err := publicsuffix.EffectiveTLDPlusOne(name)
	if err != nil {
		return name
	}
	return base
}

func lastLabel(name string) string { return name[strings.LastIndexByte(name, '.')+1:] }

// Lookup returns the sender whose base domain is base.
func Lookup(base string) (Sender, bool) {
	s, ok := load().senders[strings.ToLower(base)]
	return s, ok
}

// Size is the number of base domains in the map.
func Size() int { return len(load().senders) }
