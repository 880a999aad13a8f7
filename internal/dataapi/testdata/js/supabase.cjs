// Drives mailwatch's /rest/v1 with the real @supabase/supabase-js client,
// one query per filter method, and prints every answer as JSON for the Go
// test to check. Environment: BASE (http://127.0.0.1:port), TOKEN (from
// POST /api/auth/token), OTHER (another account's id), NODE_PATH.
const { createClient } = require('@supabase/supabase-js')

async function main() {
  // Realtime is not used; Node 20 has no WebSocket of its own, and
  // supabase-js wants a transport at construction all the same.
  class NoWebSocket {
    constructor() {
      throw new Error('this test opens no realtime connection')
    }
  }
  const supabase = createClient(process.env.BASE, 'unused-anon-key', {
    accessToken: async () => process.env.TOKEN,
    realtime: { transport: NoWebSocket },
  })
  const ev = () => supabase.from('events').select('account_id,payload')
  const pick = ({ data, error, count, status }) => ({ data, error, count, status })
  const queries = {
    like: ev().like('domain', '*example.com'),
    likePercent: ev().like('domain', '100%*'),
    likeEscaped: ev().like('domain', '100\\%*'),
    likeUnderscore: ev().like('domain', '100__off*'),
    ilike: ev().ilike('domain', '*EXAMPLE.COM'),
    likeAnyOf: ev().likeAnyOf('domain', ['shop*', 'blog*']),
    ilikeAllOf: ev().ilikeAllOf('domain', ['*OFF*', '1000*']),
    notIlike: ev().not('domain', 'ilike', '*example.net'),
    notIn: ev().not('event_type', 'in', '(bounce_spike,dmarc_failure)'),
    notIsNull: ev().not('domain', 'is', null),
    or: ev().or('event_type.eq.dmarc_failure,domain.ilike.*BLOG*'),
    orNested: ev().or('and(event_type.eq.bounce_spike,tags.cs.{eu}),domain.is.null'),
    orNegated: ev().or('not.and(event_type.eq.bounce_spike,severity.eq.info),domain.is.null'),
    orQuoted: ev().or('domain.eq."100%_off.example.net",domain.like.1000*'),
    orOtherAccount: ev().or(`account_id.eq.${process.env.OTHER},event_type.eq.bounce_spike`),
    match: ev().match({ event_type: 'bounce_spike', domain: 'shop.example.com' }),
    contains: ev().contains('tags', ['prod']),
    containedBy: ev().containedBy('tags', ['prod', 'eu']),
    overlaps: ev().overlaps('tags', ['eu', 'us']),
    containsJSON: ev().contains('payload', { provider: 'ses' }),
    in: ev().in('event_type', ['bounce_spike', 'dmarc_failure']),
    is: ev().is('domain', null),
    isDistinct: ev().isDistinct('domain', 'shop.example.com'),
    textSearch: ev().textSearch('payload', 'quick fox', { config: 'english', type: 'plain' }),
    otherAccount: ev().eq('account_id', process.env.OTHER),
    domainAlias: supabase.from('domains').select('domain,name').ilike('domain', '*ALICE*'),
    regexMatch: ev().regexMatch('domain', '^shop'),
    rangeGt: ev().rangeGt('tags', '[1,2]'),
    likeOnUUID: ev().like('id', '*a*'),
  }
  const out = {}
  for (const [name, q] of Object.entries(queries)) out[name] = pick(await q)
  process.stdout.write(JSON.stringify(out), () => process.exit(0))
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err))
  process.exit(1)
})
