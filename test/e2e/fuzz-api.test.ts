/** CI's short run of `npm run fuzz:api`: Schemathesis, all checks, against a freshly started stack. */
import { spawn } from 'node:child_process';
import { expect, it } from 'vitest';
import { projectRoot } from '../../worker/tools.js';

// The script starts the outside services' twins itself (sim/fuzz-suppliers.ts).
it('passes every Schemathesis check on every operation of the OpenAPI document', async () => {
  // Two Schemathesis workers: while one waits on the API the other generates its next case.
  const child = spawn('npm', ['run', '--silent', 'fuzz:api', '--', '--workers', '2'], {
    cwd: projectRoot,
    env: {
      ...process.env,
      FUZZ_MAX_EXAMPLES: '10',
      DATABASE_URL: '',
      TEMPORAL_ADDRESS: '',
      FUZZ_BASE_URL: '',
      FUZZ_API_KEY: '',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (c) => (output += c));
  child.stderr.on('data', (c) => (output += c));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  // On failure show Schemathesis' failures and errors sections (each failure with its curl to
  // reproduce, each runtime error with its operation and cause), not the warnings about links that
  // come after them.
  const reported = [
    ...output.matchAll(/=+ (?:FAILURES|ERRORS) =+([\s\S]*?)(?==+ (?:ERRORS|FAILURES|WARNINGS|SUMMARY) =+)/g),
  ]
    .map((section) => section[0].trim())
    .join('\n\n');
  expect({ code, failures: code === 0 ? '' : (reported || output.slice(-6000)).slice(0, 20_000) }).toEqual({
    code: 0,
    failures: '',
  });
  expect(output).toMatch(/Tested: \d+/);
  // A pass means little if the cases never got past authentication (until 2026-11-29 most were
  // 401s to a generated Authorization header): only the inbound-email webhook, which takes its
  // workspace's signature instead of a key, may answer nothing but 401.
  const onlyRefused = /Authentication failed:[\s\S]*?(?=\n\s*💡)/.exec(output)?.[0] ?? '';
  const refusedOperations = [...onlyRefused.matchAll(/^\s+- (\S+ \S+)$/gm)].map((m) => m[1]);
  expect(refusedOperations.filter((operation) => operation !== 'POST /inbox/inbound-email/')).toEqual([]);
  // What was run and how long each phase took, for the CI log. Every line is prefixed: the
  // summary's own last line (`=== 3 warnings in 180.72s ===`) would read as a test runner's verdict.
  // (Up to its closing `=== … in Ns ===` line: the stack's shutdown logs come after it.)
  const summary =
    /=+ SUMMARY =+[\s\S]*?\n=+ [^\n]* in [\d.]+s =+/.exec(output)?.[0] ??
    /=+ SUMMARY =+[\s\S]*$/.exec(output)?.[0] ??
    output.slice(-3000);
  console.log(
    summary
      .trimEnd()
      .split('\n')
      .map((line) => `  schemathesis | ${line}`)
      .join('\n'),
  );
}, 1_200_000);
