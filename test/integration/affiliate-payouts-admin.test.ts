/** The operator's affiliate payout commands (issue 20): the program pause and each gate, as the settings route then shows them. */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { insertAffiliate } from '../../store/affiliates/affiliates.js';
import { setPayoutProgramPaused } from '../../store/affiliates/payouts.js';
import { projectRoot } from '../../worker/tools.js';
import { useTestStack, withKey } from '../support/test-stack.js';

const run = promisify(execFile);
const { stack } = useTestStack({ workspaces: false });

async function admin(...args: string[]) {
  const env: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: stack.databaseUrl };
  try {
    const { stdout, stderr } = await run('npm', ['run', '--silent', 'admin', '--', ...args], { cwd: projectRoot, env });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

describe('affiliate payout admin commands', () => {
  it('pause the program, verify identity and block, as the settings route then says; refuse an unknown gate or workspace', async () => {
    const ws = await stack.createWorkspace('paid');
    const settings = async () => (await stack.app.inject({ method: 'GET', url: '/affiliate/payout-settings/', headers: withKey(ws.apiKey) })).json();

    const notEnrolled = await admin('affiliate-gate', '--workspace', ws.workspaceId, '--gate', 'blocked', '--on', 'true');
    expect(notEnrolled.code).toBe(1);
    expect(notEnrolled.stderr).toMatch(/Affiliate enrolment/);
    await insertAffiliate(stack.sql, { workspaceId: ws.workspaceId, displayName: 'Aff', timeZone: 'UTC' });

    expect(JSON.parse((await admin('affiliate-payouts', '--paused', 'true', '--note', 'audit')).stdout)).toEqual({ affiliate_payouts_paused: true });
    expect(await settings()).toMatchObject({ program_paused: true, next_payout_status: 'paused' });
    await setPayoutProgramPaused(stack.sql, false, null);

    expect((await admin('affiliate-gate', '--workspace', ws.workspaceId, '--gate', 'identity_verified', '--on', 'true')).code).toBe(0);
    expect((await admin('affiliate-gate', '--workspace', ws.workspaceId, '--gate', 'blocked', '--on', 'true', '--note', 'fraud check')).code).toBe(0);
    expect(await settings()).toMatchObject({ program_paused: false, identity_verified: true, blocked: true, next_payout_status: 'blocked', next_payout_blocker: 'no_payout_email' });

    const bad = await admin('affiliate-gate', '--workspace', ws.workspaceId, '--gate', 'rich', '--on', 'true');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--gate/);
  });
});
