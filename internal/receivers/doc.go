// Package receivers is the server side of mailwatch's temporary inboxes:
//
//   - Store files inbound messages under their receivers. It implements
//     smtpd.Store for the SMTP listener and serves the email and SMS ingress
//     webhooks, so every path parses, stores and announces a message the same
//     way: one transaction per delivery that locks each receiving receiver,
//     inserts one message row per receiver (raw bytes, parsed fields, links
//     and codes) and emits receiver_message_received. A trigger on the
//     message table NOTIFYs the receiver's id in that same transaction.
//   - Hub wakes long-poll waiters: one LISTEN connection per process (a
//     dedicated pgx.Conn, not a pool connection) and an in-memory registry
//     keyed by receiver id. A waiter holds no database connection while it
//     waits; it re-checks the database when woken.
//   - Wait answers the next message; WaitMatching answers the messages that
//     pass a Match (from, to, subject, body, headers, count, since), on one
//     receiver or on every live receiver with a label. Match is the one
//     place the filters' rules and bounds live; it runs in memory on each
//     wake-up over the messages after the wait's cursor.
package receivers
