/**
 * Polls Postgres for the claimed steps of one workspace, twice a second: the claims it sees are
 * evidence independent of the browsers (a claim whose answer was lost to a restart shows up only
 * here), and a sample with two claimed steps of one account is a violation on its own.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import type { Sql } from '../db/sql.js';
import type { ObservedClaim } from './chaos-checks.js';

export class ClaimObserver {
  readonly claims = new Map<string, ObservedClaim>();
  readonly doubleClaims: string[] = [];
  /** Steps by status at the last sample. */
  counts = new Map<string, number>();
  samples = 0;
  errors = 0;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly sql: Sql,
    private readonly workspaceId: string,
    private readonly everyMs = 500,
  ) {}

  start(): this {
    this.running ??= this.loop();
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }

  async sample(): Promise<void> {
    const startedAt = Date.now();
    const claimed = await this.sql<{ id: string; account_id: string; claimed_at: Date }[]>`
      select id, account_id, claimed_at from browser_steps where workspace_id = ${this.workspaceId} and status = 'claimed'`;
    const counts = await this.sql<{ status: string; n: number }[]>`
      select status, count(*)::int as n from browser_steps where workspace_id = ${this.workspaceId} group by status`;
    this.samples += 1;
    this.counts = new Map(counts.map((c) => [c.status, c.n]));
    const accounts = new Map<string, string>();
    for (const row of claimed) {
      const other = accounts.get(row.account_id);
      if (other)
        this.doubleClaims.push(
          `account ${row.account_id.slice(0, 8)} had steps ${other.slice(0, 8)} and ${row.id.slice(0, 8)} claimed at once`,
        );
      accounts.set(row.account_id, row.id);
      const key = `${row.id}@${row.claimed_at.getTime()}`;
      const seen = this.claims.get(key);
      // The query ran after startedAt: the claim was held at least until then.
      if (seen) seen.lastSeen = startedAt;
      else
        this.claims.set(key, {
          stepId: row.id,
          accountId: row.account_id,
          claimedAt: row.claimed_at.getTime(),
          firstSeen: startedAt,
          lastSeen: startedAt,
        });
    }
  }

  private async loop() {
    while (!this.stopped) {
      await this.sample().catch(() => {
        this.errors += 1;
      });
      await sleep(this.everyMs);
    }
  }
}
