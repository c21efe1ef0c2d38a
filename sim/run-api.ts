/**
 * The API alone, as a child process the chaos test restarts: the same buildApp the stack runs,
 * configured from the environment (DATABASE_URL, TEMPORAL_ADDRESS, HOST, PORT, ...). SIGTERM
 * drains it (in-flight requests finish, new ones are refused) and exits. Prints "api ready".
 */
import { Client, Connection } from '@temporalio/client';
import { renameSync } from 'node:fs';
import pino from 'pino';
import { buildApp } from '../api/app.js';
import { createTokenVerifier } from '../services/platform/tokens.js';
import { createSql } from '../db/sql.js';
import { resolveTokenConfig } from '../worker/auth-config.js';
import { createIntegrations, readIntegrationsConfig } from '../integrations/config.js';
import { readConfig } from '../worker/config.js';

// Started by the chaos test: leave with it (its end of our stdin closes however it exits).
if (process.env.EXIT_WITH_PARENT === '1') {
  process.stdin.on('end', () => process.exit(0)).resume();
}

const config = readConfig();
const killAfterClaim = Number(process.env.CHAOS_KILL_AFTER_CLAIM ?? 0);
const faultToken = process.env.CHAOS_FAULT_TOKEN;
let claimsSinceStart = 0;

/**
 * CHAOS_KILL_AFTER_CLAIM=N: the process SIGKILLs itself between the commit of its N-th claim and
 * that claim's signal (the claim fault, decision 050): the claim is committed, the browser never
 * hears, and no workflow was told. Counted per process, so a restarted API dies again N claims on.
 * With CHAOS_FAULT_TOKEN, it dies only once it takes the token (renames the file away: one process
 * can); the chaos run puts the token back while every API process answers, so the fault never takes
 * the last one (decision 050). Until then every further claim tries again.
 */
function afterClaimCommit() {
  claimsSinceStart += 1;
  if (claimsSinceStart < killAfterClaim) return;
  if (faultToken) {
    try {
      renameSync(faultToken, `${faultToken}.${process.pid}`);
    } catch {
      return;
    }
  }
  process.kill(process.pid, 'SIGKILL');
}
if (!config.databaseUrl || !config.temporalAddress) throw new Error('run-api needs DATABASE_URL and TEMPORAL_ADDRESS');
const sql = createSql(config.databaseUrl);
const connection = await Connection.connect({ address: config.temporalAddress });
const app = await buildApp({
  sql,
  temporal: { client: new Client({ connection, namespace: config.temporalNamespace }), taskQueue: config.taskQueue },
  verifyToken: createTokenVerifier(await resolveTokenConfig(sql)),
  rateLimit: { limit: config.rateLimitPerMinute, windowSeconds: 60 },
  logger: pino({ level: config.logLevel }),
  integrations: createIntegrations(readIntegrationsConfig()),
  ...(killAfterClaim > 0 ? { faults: { afterClaimCommit } } : {}),
});
await app.listen({ port: config.port, host: config.host });
process.stdout.write(`api ready http://${config.host}:${config.port}\n`);

let closing = false;
process.on('SIGTERM', () => {
  if (closing) return;
  closing = true;
  void (async () => {
    await app.close();
    await connection.close();
    await sql.end({ timeout: 5 });
    process.exit(0);
  })();
});
