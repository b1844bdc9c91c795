// Evaluates AWS requests against identity policies with
// @cloud-copilot/iam-simulate, offline. Reads a JSON array of cases from
// standard input, {principal, policy: [statements], action, resource,
// context}, and writes a JSON array of verdicts in the same order:
// {result: "Allowed" | "ImplicitlyDenied" | "ExplicitlyDenied", error}.
// Used by internal/iamcheck; the principal is an IAM role of one account.
import { runSimulation } from '@cloud-copilot/iam-simulate'

const account = '123456789012'
const chunks = []
for await (const c of process.stdin) chunks.push(c)
const cases = JSON.parse(Buffer.concat(chunks).toString('utf8'))
const out = []
for (const c of cases) {
  const r = await runSimulation({
    identityPolicies: [{ name: c.principal, policy: { Version: '2012-10-17', Statement: c.policy } }],
    serviceControlPolicies: [],
    resourceControlPolicies: [],
    request: {
      action: c.action,
      principal: `arn:aws:iam::${account}:role/${c.principal}`,
      resource: { accountId: account, resource: c.resource },
      contextVariables: c.context || {}
    }
  }, {})
  if (r.resultType === 'error') {
    out.push({ result: '', error: JSON.stringify(r.errors) })
  } else {
    out.push({ result: r.overallResult })
  }
}
process.stdout.write(JSON.stringify(out))
