/**
 * `npm run fuzz:api`: Schemathesis fuzzes every operation of the OpenAPI document, with every
 * check on, against the real stack (embedded Postgres, the Temporal dev server, the worker and
 * the API) started in a throwaway DATA_DIR, its outside services local twins (sim/fuzz-suppliers.ts).
 * With FUZZ_BASE_URL and FUZZ_API_KEY it fuzzes that running service instead and starts nothing. FUZZ_MAX_EXAMPLES (default 100) bounds the cases
 * per operation. Exits with Schemathesis's code: 0 when it found no failure.
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childEnvironment, readFuzzSettings } from '../integrations/config.js';
import { createSql } from '../db/sql.js';
import { readConfig } from '../worker/config.js';
import { createWorkspaceWithAdmin } from '../worker/provisioning.js';
import { signingSecret } from '../worker/auth-config.js';
import { mintAccessToken } from '../services/platform/tokens.js';
import { freePort } from '../worker/ports.js';
import { startStack } from '../worker/stack.js';
import { startFuzzSuppliers } from './fuzz-suppliers.js';
import { ToolMissingError, projectRoot, toolsDir } from '../worker/tools.js';

const target = join(toolsDir, 'schemathesis');

/** Schemathesis in `.tools/schemathesis`, installed from PyPI with python3's pip the first time. */
function ensureSchemathesis() {
  if (existsSync(join(target, 'schemathesis', '__init__.py'))) return;
  if (spawnSync('python3', ['-m', 'pip', '--version'], { stdio: 'ignore' }).status !== 0) {
    throw new ToolMissingError(
      'Cannot fuzz the API: Schemathesis is not under .tools/schemathesis and there is no python3 with ' +
        'pip to install it with. Install Python 3 with pip (for example "apt-get install python3-pip") and run again.',
    );
  }
  mkdirSync(target, { recursive: true });
  process.stdout.write('Installing Schemathesis into .tools/schemathesis...\n');
  try {
    execFileSync(
      'python3',
      ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--target', target, 'schemathesis'],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
  } catch (error) {
    rmSync(target, { recursive: true, force: true }); // a half install would pass the check above next time
    const stderr = String((error as { stderr?: Buffer }).stderr ?? '')
      .trim()
      .split('\n')
      .slice(-3)
      .join(' ');
    throw new ToolMissingError(
      `Cannot install Schemathesis: "python3 -m pip install --target .tools/schemathesis schemathesis" failed ` +
        `(${stderr || 'no output'}). Check that PyPI is reachable and run again.`,
    );
  }
}

function runSchemathesis(
  apiUrl: string,
  apiKey: string,
  sender: ExtensionSender,
  resources: FuzzedResources,
  maxExamples: string,
): Promise<number> {
  const args = [
    // Schemathesis's own command line with two fixes to what it runs on (see the script).
    join(projectRoot, 'sim', 'schemathesis-run.py'),
    'run',
    `${apiUrl}/openapi.json`,
    '--url',
    apiUrl,
    '--header',
    `X-API-Key: ${apiKey}`,
    '--checks',
    'all',
    '--max-examples',
    maxExamples,
    // Anything after `npm run fuzz:api --` goes to Schemathesis (`--include-tag billing`, say).
    ...process.argv.slice(2),
  ];
  const shown = args
    .map((arg) => (/\s/.test(arg) ? `'${arg}'` : arg))
    .join(' ')
    .replace(apiKey, '<key>');
  process.stdout.write(`\n$ python3 ${shown}\n\n`);
  // Schemathesis keeps its crash cache (failures replayed first next run) in .schemathesis/ and
  // Hypothesis its data in .hypothesis/ of the working folder: .tools/ is ignored by git.
  const child = spawn('python3', args, {
    cwd: toolsDir,
    stdio: 'inherit',
    // schemathesis.toml sends the extension routes this token in X-API-Key instead of the key.
    env: childEnvironment({
      PYTHONPATH: target,
      FUZZ_EXTENSION_TOKEN: sender.token ?? '',
      FUZZ_CLAIMED_STEP: sender.claimedStepId ?? '00000000-0000-0000-0000-000000000000',
      FUZZ_TABLE_ID: resources.tableId,
      FUZZ_SEQUENCE_ID: resources.sequenceId,
      FUZZ_CONTACT_ID: resources.contactId,
      FUZZ_SESSION_ID: resources.sessionId,
      FUZZ_PERSON_TOKEN: process.env.FUZZ_PERSON_TOKEN ?? '',
    }),
  });
  // Ctrl-C reaches the child through the terminal; a SIGTERM to us is passed on. Either way the
  // child ends, and the caller's finally stops the stack instead of Node dying with it running.
  const forward = (signal: NodeJS.Signals) => child.kill(signal);
  process.on('SIGINT', forward).on('SIGTERM', forward);
  return new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code) => resolve(code ?? 1));
  });
}

/**
 * The extension's routes (`/pnet/agent/…`) take a sender account's connection token, not an API
 * key. The local stack gets a second workspace with a sender profile, whose token is used there:
 * in the fuzzed key's own workspace, Schemathesis reads the profile from GET /sender-profiles/ and
 * disconnects it, replacing the token mid-run. Against a running service, FUZZ_EXTENSION_TOKEN
 * names one (of another workspace than FUZZ_API_KEY's); without it those routes get the key, 401.
 *
 * The step routes (`/pnet/agent/actions/{action_id}/…`) need a step of that account: one is queued
 * and claimed the way a browser does, and its id is every case's `action_id` (FUZZ_CLAIMED_STEP).
 * Schemathesis's claimed_at never names the claim, so they answer 409 past their checks.
 */
interface ExtensionSender {
  token: string | undefined;
  /** When there is none, a nil id: those routes answer 404. */
  claimedStepId: string | undefined;
}

/** One call of the setup before the run: anything but a 2xx stops it, naming the call. */
function setupCaller(apiUrl: string, what: string) {
  return async (method: string, path: string, headers: Record<string, string>, body?: object) => {
    const response = await fetch(`${apiUrl}${path}`, {
      method,
      headers: { ...headers, 'Content-Type': 'application/json' },
      body: body ? JSON.stringify(body) : undefined,
    });
    if (!response.ok)
      throw new Error(
        `Could not set up ${what}: ${method} ${path} answered ${response.status} ${await response.text()}`,
      );
    return (await response.json()) as Record<string, unknown>;
  };
}

async function extensionSenderFor(apiUrl: string, apiKey: string): Promise<ExtensionSender> {
  const call = setupCaller(apiUrl, "the extension's sender");
  const keyed = { 'X-API-Key': apiKey };
  const { id } = (await call('POST', '/sender-profiles/', keyed, { name: 'Fuzzing the extension routes' })) as {
    id: string;
  };
  const allWeek = { start: '00:00', end: '00:00', days: [1, 2, 3, 4, 5, 6, 7] };
  await call('PATCH', `/sender-profiles/${id}/pnet/settings/`, keyed, {
    run_mode: 'automatic',
    working_hours: allWeek,
  });
  const token = (await call('GET', `/sender-profiles/${id}/pnet/`, keyed)).connection_token as string;
  const browser = { browser_id: randomUUID() };
  const tokened = { 'X-API-Key': token };
  await call('POST', '/pnet/agent/heartbeat/', tokened, {
    ...browser,
    browser_label: 'Fuzzing',
    extension_version: '2.0.0',
    identity: { member_urn: 'urn:li:member:fuzzing' },
    lease_nonce: 'fuzzing-lease',
  });
  const account = (await call('GET', `/sender-profiles/${id}/pnet/`, keyed)).account as { id: string };
  await call('POST', '/pnet/steps/', keyed, { account_id: account.id, params: { kind: 'check_inbox' } });
  let answer: { step: { id: string } | null } = { step: null };
  for (let attempt = 0; attempt < 50; attempt += 1) {
    answer = (await call('POST', '/pnet/agent/claim/', tokened, browser)) as typeof answer;
    // The connected account may have queued its own inbox read first: any step handed over will do.
    if (answer.step) return { token, claimedStepId: answer.step.id };
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(
    `Could not set up the extension's sender: no step was handed to its browser within 10 s (last answer ${JSON.stringify(answer)}).`,
  );
}

/**
 * A table and a sequence in the fuzzed key's workspace, a contact of the sequence (the table's one
 * row) and a training session of its outbound agent: schemathesis.toml names them in every path
 * under them (FUZZ_TABLE_ID, FUZZ_SEQUENCE_ID, FUZZ_CONTACT_ID, FUZZ_SESSION_ID), so those routes
 * are fuzzed past their 404 (Schemathesis learns few of these ids on its own).
 */
interface FuzzedResources {
  tableId: string;
  sequenceId: string;
  contactId: string;
  sessionId: string;
}

async function resourcesFor(apiUrl: string, apiKey: string): Promise<FuzzedResources> {
  const call = setupCaller(apiUrl, 'the fuzzed table and sequence');
  const keyed = { 'X-API-Key': apiKey };
  const id = async (method: string, path: string, body?: object) =>
    ((await call(method, path, keyed, body)) as { id: string }).id;
  const tableId = await id('POST', '/tables/', { name: 'Fuzzing the table routes' });
  const email = await id('POST', `/tables/${tableId}/columns/`, { kind: 'input', name: 'Email' });
  const rowId = await id('POST', `/tables/${tableId}/rows/`, { cells: { [email]: 'fuzzing@example.com' } });
  const sequenceId = await id('POST', '/sequences/', {
    name: 'Fuzzing the sequence routes',
    audience_table_id: tableId,
    audience_mapping: { email_column_id: email },
  });
  const enrolled = (await call('POST', `/sequences/${sequenceId}/contacts/`, keyed, { row_ids: [rowId] })) as {
    results: { contact: { id: string } }[];
  };
  const agentId = await id('POST', '/outbound-agents/', {
    name: 'Fuzzing the training routes',
    slots: [{ slot_key: 'opener', prompt: 'Say hello.' }],
  });
  await call('PUT', `/sequences/${sequenceId}/agent/`, keyed, { agent_id: agentId });
  const sessionId = await id('POST', `/sequences/${sequenceId}/agent/training/`, { sample_size: 1, ready_after: 1 });
  return { tableId, sequenceId, contactId: enrolled.results[0]!.contact.id, sessionId };
}

/**
 * Schemathesis feeds the ids of keys it created itself into PATCH and DELETE /api-keys/{key_id}/,
 * never the ids from GET /api-keys/ (the dependency analysis ties key_id to ApiKeyCreated only), so
 * it cannot expire or delete the key it authenticates with. Should that change, every later
 * request would be a 401, which the document allows, and the run would pass having tested nothing:
 * so the key and the extension's token are checked afterwards and a dead one fails the run.
 */
async function fuzz(apiUrl: string, apiKey: string, sender: ExtensionSender, maxExamples: string): Promise<number> {
  const { token: extensionToken } = sender;
  const authenticates = async (key: string, path: string) =>
    (await fetch(`${apiUrl}${path}`, { headers: { 'X-API-Key': key } })).status !== 401;
  if (!(await authenticates(apiKey, '/workspace/')))
    throw new Error(`The API key does not authenticate at ${apiUrl}/workspace/.`);
  if (extensionToken && !(await authenticates(extensionToken, '/pnet/agent/config/'))) {
    throw new Error(`The connection token does not authenticate at ${apiUrl}/pnet/agent/config/.`);
  }
  const code = await runSchemathesis(apiUrl, apiKey, sender, await resourcesFor(apiUrl, apiKey), maxExamples);
  if (!(await authenticates(apiKey, '/workspace/'))) {
    process.stderr.write(
      '\nThe API key the fuzzer authenticated with no longer works (deleted or expired during the run): its results after that point are 401s and prove nothing.\n',
    );
    return code || 1;
  }
  if (extensionToken && !(await authenticates(extensionToken, '/pnet/agent/config/'))) {
    process.stderr.write(
      '\nThe connection token the extension routes were fuzzed with no longer works (its sender was disconnected during the run): their results after that point are 401s and prove nothing.\n',
    );
    return code || 1;
  }
  return code;
}

async function main(): Promise<number> {
  ensureSchemathesis();
  const { baseUrl, apiKey: key, extensionToken, claimedStepId, maxExamples, logLevel } = readFuzzSettings();
  if (baseUrl && key)
    return fuzz(baseUrl.replace(/\/+$/, ''), key, { token: extensionToken, claimedStepId }, maxExamples);

  const dataDir = mkdtempSync(join(tmpdir(), 'fuzz-api-'));
  // mkdtemp makes it 0700; as root, embedded Postgres runs as a postgres user that must get in.
  chmodSync(dataDir, 0o711);
  let suppliers: Awaited<ReturnType<typeof startFuzzSuppliers>> | undefined;
  let stack: Awaited<ReturnType<typeof startStack>> | undefined;
  try {
    // The outside services' routes are fuzzed past their 503 (not configured) against local twins,
    // never against a real service whose settings happen to be in the environment.
    suppliers = await startFuzzSuppliers();
    Object.assign(process.env, suppliers.environment);
    const port = await freePort(3100);
    stack = await startStack({
      ...readConfig(),
      dataDir,
      port,
      // Schemathesis sends thousands of requests with one key: the per-key limit would answer 429s
      // that say nothing about the API, so it is off for this stack.
      rateLimitPerMinute: 0,
      // Only unhandled errors (the 500s a failure report needs explained) reach the terminal.
      logLevel,
    });
    // The extension's sender lives in a workspace of its own, out of the fuzzed key's reach.
    const sql = createSql(stack.databaseUrl);
    let senderKey: string;
    try {
      senderKey = (await createWorkspaceWithAdmin(sql, { name: 'Fuzzing the extension routes', plan: 'paid' })).api_key;
      // Signing up and accepting an invitation take a person's bearer token (an API key stands for
      // no person): a new person of no workspace, minted with the stack's development secret.
      process.env.FUZZ_PERSON_TOKEN = await mintAccessToken((await signingSecret(sql, {}))!, {
        sub: `fuzz-person-${randomUUID()}`,
        email: 'fuzz-person@example.com',
        email_verified: true,
        name: 'Fuzz Person',
      });
    } finally {
      await sql.end({ timeout: 5 });
    }
    return await fuzz(stack.apiUrl!, stack.devApiKey!, await extensionSenderFor(stack.apiUrl!, senderKey), maxExamples);
  } finally {
    await stack?.stop();
    await suppliers?.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      error instanceof ToolMissingError
        ? `\n${error.message}\n\n`
        : `fuzz:api failed: ${error instanceof Error ? error.message : String(error)}\n`,
    );
    process.exit(1);
  },
);
