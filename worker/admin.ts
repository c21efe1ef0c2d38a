/**
 * The operator command line (a contract used by scripts and tests):
 *   create-workspace --name NAME --plan free|paid [--email E] [--user SUB] [--org ORG_ID] [--referral CODE] [--affiliate CODE | --affiliate-click ID]
 *   add-member --workspace ID --email E --role admin|member [--user SUB]
 *   map-org --workspace ID --org ORG_ID [--replace true]   (an existing workspace to a provider organisation)
 *   set-member-user --workspace ID --email E --user SUB     (a member's user id at the identity provider)
 *   grant-credits --workspace ID --amount N
 *   set-plan --workspace ID --plan free|paid      (an operator's plan, without a payment provider)
 *   design-partner --workspace ID --decision accept|decline|end [--note TEXT]
 *   pause-everywhere --paused true|false   (stops all unattended sending, every workspace)
 *   affiliate-payouts --paused true|false [--note TEXT]   (the affiliate program's payout pause)
 *   affiliate-gate --workspace ID --gate under_review|blocked|unavailable|identity_verified|destination_hold --on true|false [--note TEXT]
 *   affiliate-payout-cycle [--at ISO]   (runs the payout cycle now for that time's month, on the service's Temporal)
 * It works against the database the service uses: DATABASE_URL, else the running local stack's
 * (DATA_DIR/stack.json), else it starts the embedded Postgres of DATA_DIR for the one command.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { setPausedEverywhere } from '../store/pnet/agent-sending.js';
import { migrate } from '../db/migrate.js';
import { createSql, type Sql } from '../db/sql.js';
import { PlanSchema, RoleSchema } from '../domain/shared/common.js';
import { ApiError } from '../domain/shared/errors.js';
import { readConfig } from './config.js';
import { readIntegrationsConfig } from '../integrations/config.js';
import { startEmbeddedPostgres } from './embedded-postgres.js';
import {
  addWorkspaceMember,
  createWorkspaceWithAdmin,
  decideDesignPartnerApplication,
  grantWorkspaceCredits,
  mapWorkspaceToOrganisation,
  setMemberUser,
  setWorkspacePlan,
} from './provisioning.js';
import { databaseName, ensureDatabase, stackFilePath, type StackFile } from './stack-file.js';
import { workspaceExists } from '../store/platform/workspaces.js';
import { setAffiliatePayoutGate, setAffiliatePayoutsPaused } from '../services/affiliates/payouts.js';
import { runPayoutCycle } from '../services/affiliates/payouts-client.js';
import { Client, Connection } from '@temporalio/client';

const commands = {
  'create-workspace': z.object({
    name: z.string().min(1).max(255),
    plan: PlanSchema,
    email: z.email().optional(),
    referral: z.string().min(1).max(64).optional(),
    affiliate: z.string().min(1).max(64).optional(),
    'affiliate-click': z.uuid().optional(),
    user: z.string().min(1).max(255).optional(),
    org: z.string().min(1).max(255).optional(),
  }),
  'add-member': z.object({
    workspace: z.uuid(),
    email: z.email(),
    role: RoleSchema,
    user: z.string().min(1).max(255).optional(),
  }),
  'map-org': z.object({
    workspace: z.uuid(),
    org: z.string().min(1).max(255),
    replace: z.enum(['true', 'false']).optional(),
  }),
  'set-member-user': z.object({ workspace: z.uuid(), email: z.email(), user: z.string().min(1).max(255) }),
  'grant-credits': z.object({ workspace: z.uuid(), amount: z.coerce.number().int().positive() }),
  'pause-everywhere': z.object({ paused: z.enum(['true', 'false']) }),
  'set-plan': z.object({ workspace: z.uuid(), plan: PlanSchema }),
  'design-partner': z.object({
    workspace: z.uuid(),
    decision: z.enum(['accept', 'decline', 'end']),
    note: z.string().max(2000).optional(),
  }),
  'affiliate-payouts': z.object({ paused: z.enum(['true', 'false']), note: z.string().max(2000).optional() }),
  'affiliate-payout-cycle': z.object({ at: z.iso.datetime({ offset: true }).optional() }),
  'affiliate-gate': z.object({
    workspace: z.uuid(),
    gate: z.enum(['under_review', 'blocked', 'unavailable', 'identity_verified', 'destination_hold']),
    on: z.enum(['true', 'false']),
    note: z.string().max(2000).optional(),
  }),
};

const usage = `usage: npm run --silent admin -- <command> [options]
  create-workspace --name NAME --plan free|paid [--email E] [--user SUB] [--org ORG_ID] [--referral CODE]
  add-member --workspace ID --email E --role admin|member [--user SUB]
  map-org --workspace ID --org ORG_ID [--replace true]
  set-member-user --workspace ID --email E --user SUB
  grant-credits --workspace ID --amount N
  pause-everywhere --paused true|false
  set-plan --workspace ID --plan free|paid
  design-partner --workspace ID --decision accept|decline|end [--note TEXT]
  affiliate-payouts --paused true|false [--note TEXT]
  affiliate-payout-cycle [--at ISO]
  affiliate-gate --workspace ID --gate under_review|blocked|unavailable|identity_verified|destination_hold --on true|false [--note TEXT]`;

async function withDatabase<T>(run: (sql: Sql) => Promise<T>): Promise<T> {
  const config = readConfig();
  let url = config.databaseUrl;
  let stop: (() => Promise<void>) | undefined;
  const stackFile = stackFilePath(config.dataDir);
  if (!url && existsSync(stackFile)) {
    const stack = JSON.parse(readFileSync(stackFile, 'utf8')) as StackFile;
    if (isAlive(stack.pid)) url = stack.database_url;
  }
  if (!url) {
    const pg = await startEmbeddedPostgres({ dataDir: join(config.dataDir, 'postgres') });
    stop = pg.stop;
    await ensureDatabase(pg.url('postgres'), databaseName);
    url = pg.url(databaseName);
  }
  const sql = createSql(url, { max: 2 });
  try {
    await migrate(sql);
    return await run(sql);
  } finally {
    await sql.end({ timeout: 5 });
    await stop?.();
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (!command || !(command in commands)) throw new UsageError(command ? `unknown command "${command}"` : 'no command');
  const { values } = parseArgs({
    args: rest,
    options: {
      name: { type: 'string' },
      plan: { type: 'string' },
      email: { type: 'string' },
      workspace: { type: 'string' },
      role: { type: 'string' },
      amount: { type: 'string' },
      paused: { type: 'string' },
      referral: { type: 'string' },
      affiliate: { type: 'string' },
      'affiliate-click': { type: 'string' },
      user: { type: 'string' },
      org: { type: 'string' },
      decision: { type: 'string' },
      note: { type: 'string' },
      gate: { type: 'string' },
      on: { type: 'string' },
      at: { type: 'string' },
      replace: { type: 'string' },
    },
    strict: true,
  });
  const parsed = commands[command as keyof typeof commands].safeParse(values);
  if (!parsed.success) {
    throw new UsageError(parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('; '));
  }
  if (command === 'affiliate-payout-cycle') {
    const o = parsed.data as z.infer<(typeof commands)['affiliate-payout-cycle']>;
    process.stdout.write(`${JSON.stringify(await runPayoutCycleNow(o.at ? new Date(o.at) : new Date()))}\n`);
    return;
  }
  const result = await withDatabase(async (sql) => {
    switch (command) {
      case 'create-workspace': {
        const o = parsed.data as z.infer<(typeof commands)['create-workspace']>;
        return createWorkspaceWithAdmin(sql, {
          name: o.name,
          plan: o.plan,
          email: o.email,
          referralCode: o.referral,
          affiliateCode: o.affiliate,
          affiliateClick: o['affiliate-click'],
          userId: o.user,
          externalOrgId: o.org,
          cookieWindowDays: readIntegrationsConfig().affiliates.cookieWindowDays,
        });
      }
      case 'add-member': {
        const o = parsed.data as z.infer<(typeof commands)['add-member']>;
        await requireWorkspace(sql, o.workspace);
        return addWorkspaceMember(sql, { workspaceId: o.workspace, email: o.email, role: o.role, userId: o.user });
      }
      case 'map-org': {
        const o = parsed.data as z.infer<(typeof commands)['map-org']>;
        return mapWorkspaceToOrganisation(sql, {
          workspaceId: o.workspace,
          orgId: o.org,
          replace: o.replace === 'true',
        });
      }
      case 'set-member-user': {
        const o = parsed.data as z.infer<(typeof commands)['set-member-user']>;
        await requireWorkspace(sql, o.workspace);
        return setMemberUser(sql, { workspaceId: o.workspace, email: o.email, userId: o.user });
      }
      case 'pause-everywhere': {
        const o = parsed.data as z.infer<(typeof commands)['pause-everywhere']>;
        await setPausedEverywhere(sql, o.paused === 'true');
        return { paused_everywhere: o.paused === 'true' };
      }
      case 'set-plan': {
        const o = parsed.data as z.infer<(typeof commands)['set-plan']>;
        await requireWorkspace(sql, o.workspace);
        return setWorkspacePlan(sql, o.workspace, o.plan);
      }
      case 'design-partner': {
        const o = parsed.data as z.infer<(typeof commands)['design-partner']>;
        await requireWorkspace(sql, o.workspace);
        return decideDesignPartnerApplication(sql, o.workspace, o.decision, o.note ?? null);
      }
      case 'affiliate-payouts': {
        const o = parsed.data as z.infer<(typeof commands)['affiliate-payouts']>;
        return setAffiliatePayoutsPaused(sql, o.paused === 'true', o.note ?? null);
      }
      case 'affiliate-gate': {
        const o = parsed.data as z.infer<(typeof commands)['affiliate-gate']>;
        await requireWorkspace(sql, o.workspace);
        const set = await setAffiliatePayoutGate(sql, {
          workspaceId: o.workspace,
          gate: o.gate,
          on: o.on === 'true',
          note: o.note ?? null,
        });
        return { affiliate_id: set.affiliate_id, gate: set.gate, on: set.on };
      }
      default: {
        const o = parsed.data as z.infer<(typeof commands)['grant-credits']>;
        await requireWorkspace(sql, o.workspace);
        return (await grantWorkspaceCredits(sql, { workspaceId: o.workspace, amount: o.amount })).available;
      }
    }
  });
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

/** The payout cycle on the service's Temporal (TEMPORAL_ADDRESS, else the running local stack's), waited for. */
async function runPayoutCycleNow(at: Date) {
  const config = readConfig();
  let address = config.temporalAddress;
  const stackFile = stackFilePath(config.dataDir);
  if (!address && existsSync(stackFile)) {
    const stack = JSON.parse(readFileSync(stackFile, 'utf8')) as StackFile;
    if (isAlive(stack.pid)) address = stack.temporal_address;
  }
  if (!address)
    throw new UsageError('no Temporal to run the cycle on: set TEMPORAL_ADDRESS or start the service (npm start)');
  const connection = await Connection.connect({ address });
  try {
    // Read back once: items still pending are followed by the next cycle.
    return await runPayoutCycle(
      { client: new Client({ connection, namespace: config.temporalNamespace }), taskQueue: config.taskQueue },
      { at, followForMs: 0 },
    );
  } finally {
    await connection.close();
  }
}

async function requireWorkspace(sql: Sql, id: string) {
  if (!(await workspaceExists(sql, id))) throw new ApiError('not_found', `Workspace ${id} not found.`);
}

class UsageError extends Error {}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof UsageError) process.stderr.write(`${error.message}\n${usage}\n`);
  else if (error instanceof ApiError) process.stderr.write(`${error.detail}\n`);
  else if ((error as { code?: string }).code === '23505')
    process.stderr.write(`Already exists: ${(error as Error).message}\n`);
  else process.stderr.write(`admin failed: ${(error as Error).message}\n`);
  process.exit(error instanceof UsageError ? 2 : 1);
});
