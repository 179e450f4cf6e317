// Drives `agent-exec mcp` with the official MCP TypeScript SDK over stdio.
//
// Usage: node client.cjs NODE_MODULES_PARENT SERVER_BINARY POLICY ROOT SECRET
//
// Started by tests/mcp_clients.rs; the SDK is loaded from the directory
// it was installed in (NODE_MODULES_PARENT). Exits 0 when every check
// holds; otherwise prints what it saw and exits 1. The SDK validates each
// structuredContent against the listed outputSchema itself; this script
// validates it again with Ajv's draft 2020-12 dialect, the schema's own.
'use strict';

const fs = require('node:fs');
const { createRequire } = require('node:module');

const [installDir, binary, policy, root, secret] = process.argv.slice(2);
const need = createRequire(require('node:path').join(installDir, 'package.json'));
const { Client } = need('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = need('@modelcontextprotocol/sdk/client/stdio.js');
const Ajv2020 = need('ajv/dist/2020').default;

const MARKER = '4729';
const seen = [];

function check(cond, what, got) {
  if (!cond) {
    console.error(`FAILED: ${what}\n  got: ${JSON.stringify(got)}`);
    process.exit(1);
  }
}

function survivors() {
  const found = [];
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let argv;
    try {
      argv = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0');
    } catch {
      continue;
    }
    if (argv[0] === 'sleep' && argv[1] === MARKER) found.push(Number(pid));
  }
  return found;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function main() {
  const transport = new StdioClientTransport({
    command: binary,
    args: ['mcp', '--policy', policy, '--root', root],
    env: { AGENT_EXEC_TEST_API_KEY: secret, PATH: process.env.PATH },
    stderr: 'inherit',
  });
  const client = new Client({ name: 'agent-exec-test', version: '1.0.0' });
  await client.connect(transport);
  check(client.getServerCapabilities().tools, 'tools advertised', client.getServerCapabilities());

  const { tools } = await client.listTools();
  check(tools.length === 1 && tools[0].name === 'run_shell', 'one tool, run_shell', tools);
  const tool = tools[0];
  seen.push(JSON.stringify(tools));
  check(tool.inputSchema.additionalProperties === false, 'strict inputSchema', tool.inputSchema);
  check(tool.outputSchema && tool.outputSchema.type === 'object', 'an object outputSchema', tool.outputSchema);
  check(tool.annotations && tool.annotations.readOnlyHint === false, 'annotations', tool.annotations);
  const validate = new Ajv2020({ strict: false }).compile(tool.outputSchema);

  const call = async (args, options) => {
    const r = await client.callTool({ name: 'run_shell', arguments: args }, undefined, options);
    seen.push(JSON.stringify(r));
    check(validate(r.structuredContent), 'structuredContent matches outputSchema', validate.errors);
    return r;
  };

  let r = await call({ command: 'cat hello.txt' });
  check(!r.isError && r.structuredContent.stdout === 'hello from the root\n', 'allowed call', r);
  check(r.content[0].type === 'text' && r.content[0].text.includes('hello from the root'), 'text', r.content);

  r = await call({ command: 'curl http://example.com' });
  check(r.isError && r.structuredContent.error_type === 'PERMISSION_DENIED', 'denied call', r);

  for (const bad of [{ command: 'ls', bogus: 1 }, { command: ['ls'] }, { cwd: 'src' }]) {
    r = await call(bad);
    check(r.isError && r.structuredContent.error_type === 'INVALID_ARGUMENTS', `malformed ${JSON.stringify(bad)}`, r);
  }

  r = await call({ command: 'echo "key=$AGENT_EXEC_TEST_API_KEY"' });
  check(r.structuredContent.stdout === 'key=\n', 'the secret is not in the environment', r);

  // Approval needed and this client offers no elicitation: refused, not run.
  r = await call({ command: 'getconf PATH' });
  check(
    r.isError && r.structuredContent.error_type === 'APPROVAL_REQUIRED' && r.structuredContent.approved === null,
    'approval refused without a human',
    r,
  );

  const progress = [];
  r = await call({ command: 'sleep 2.5' }, { onprogress: (p) => progress.push(p.progress) });
  check(!r.isError && progress.length >= 1, 'progress notifications', progress);

  check(survivors().length === 0, 'no marked process before', survivors());
  const abort = new AbortController();
  const pending = call({ command: `sleep ${MARKER} & sleep ${MARKER}; wait`, timeout_ms: 600000 }, { signal: abort.signal });
  await sleep(1500);
  abort.abort('test cancels');
  await pending.then(
    (v) => check(false, 'a cancelled call rejects', v),
    () => {},
  );
  const deadline = Date.now() + 10000;
  while (survivors().length && Date.now() < deadline) await sleep(100);
  check(survivors().length === 0, 'no survivor after notifications/cancelled', survivors());

  r = await call({ command: 'echo still here' });
  check(r.structuredContent.stdout === 'still here\n', 'serves after cancel', r);

  await client.close();
  const leaked = seen.filter((s) => s.includes(secret));
  check(leaked.length === 0, 'the secret never appears', leaked);
  console.log(JSON.stringify({ ok: true, progress: progress.length }));
}

main().catch((e) => {
  console.error('FAILED:', e);
  process.exit(1);
});
