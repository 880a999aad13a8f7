// Drives mailwatch's /rest/v1 with the real @supabase/postgrest-js client
// and prints every answer as JSON for the Go test to check. Environment:
// BASE (http://127.0.0.1:port), TOKEN (from POST /api/auth/token), OTHER
// (another account's id), NODE_PATH (where scripts/node-deps installed it).
const { PostgrestClient } = require('@supabase/postgrest-js')

async function main() {
  const rest = new PostgrestClient(process.env.BASE + '/rest/v1', {
    headers: { Authorization: 'Bearer ' + process.env.TOKEN },
  })
  const anon = new PostgrestClient(process.env.BASE + '/rest/v1', {
    headers: { Authorization: 'Bearer not-a-token' },
  })
  const pick = ({ data, error, count, status }) => ({ data, error, count, status })
  const out = {
    list: pick(await rest.from('events').select('id,event_type,created_at')),
    filtered: pick(await rest.from('events').select('*').eq('event_type', 'bounce_spike')),
    negated: pick(await rest.from('events').select('id').neq('event_type', 'bounce_spike')),
    inList: pick(await rest.from('events').select('id').in('event_type', ['bounce_spike', 'a,b'])),
    ordered: pick(await rest.from('events').select('created_at').order('created_at', { ascending: false }).limit(2)),
    range: pick(await rest.from('events').select('id').gte('created_at', '2000-01-01T00:00:00Z').lt('created_at', '2999-01-01T00:00:00Z')),
    isNull: pick(await rest.from('events').select('id').is('acknowledged_at', null)),
    counted: pick(await rest.from('events').select('id', { count: 'exact' }).range(0, 1)),
    headCount: pick(await rest.from('events').select('*', { count: 'exact', head: true })),
    newTable: pick(await rest.from('suppressions').select('email,reason')),
    dailyCounts: pick(await rest.from('event_daily_counts').select('account_id,day,event_type,severity,events').order('day').order('event_type')),
    single: pick(await rest.from('domains').select('name,score').single()),
    singleOfMany: pick(await rest.from('events').select('id').single()),
    maybeNone: pick(await rest.from('domains').select('name').eq('name', 'nope.example').maybeSingle()),
    otherAccount: pick(await rest.from('events').select('id').eq('account_id', process.env.OTHER)),
    unknownTable: pick(await rest.from('nope').select('*')),
    unknownColumn: pick(await rest.from('events').select('nope')),
    badValue: pick(await rest.from('events').select('id').eq('id', 'not-a-uuid')),
    unauthenticated: pick(await anon.from('events').select('id')),
  }
  process.stdout.write(JSON.stringify(out))
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err))
  process.exit(1)
})
