/**
 * A simulated browser extension for one sender account: it checks in when the server says,
 * holds the account's lease with its nonce, claims while it holds it, "runs" the step for a
 * while (check-ins naming the running claim keep its lease; `running_claim: lost` stops it),
 * then reports. Misbehaviours on demand: duplicate and stale reports, late reports, silence.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  browserReportedErrorCodes,
  type BrowserErrorCode,
  type BrowserStep,
  type StepErrorCode,
} from '../domain/pnet/steps.js';
import { claimLeaseSeconds } from '../domain/pnet/timing.js';
import type { AgentState } from '../domain/pnet/agent.js';
import type { AgentAnswer, AgentClient, ClaimAnswer, ResultBody } from './agent-client.js';
import { SimLog, type ClaimRecord, type ReportCopy, type ReportRecord } from './sim-log.js';

/**
 * The codes a browser reports for a step it could not do (the first twelve of the vocabulary),
 * less `blocked_checkpoint`, `not_authenticated` and `account_mismatch`: those describe the
 * account rather than the step and stop its line, which a load simulation does not want.
 */
const accountLevel: ReadonlySet<StepErrorCode> = new Set([
  'blocked_checkpoint',
  'not_authenticated',
  'account_mismatch',
]);
export const browserErrorCodes: readonly BrowserErrorCode[] = browserReportedErrorCodes.filter(
  (code) => !accountLevel.has(code),
);

export interface BrowserOptions {
  client: AgentClient;
  /** Who the browser is signed in as; every browser of one account must say the same. */
  identity: { member_urn: string; display_name?: string | null };
  label?: string;
  browserId?: string;
  leaseNonce?: string;
  extensionVersion?: string;
  /** Cap on the server's `poll_after_seconds`, so a simulation does not idle for a minute. */
  maxPollSeconds?: number;
  /** How long "running" a step takes, uniformly between the two (ms). */
  runMs?: [number, number];
  /** Check-ins naming the running claim, this often (ms); well inside the claim lease. */
  renewEveryMs?: number;
  failRate?: number;
  skipRate?: number;
  /** Share of results posted more than once at the same time (2 to maxCopies copies). */
  duplicateRate?: number;
  maxCopies?: number;
  /** Share of results also posted naming an earlier claim. */
  staleRate?: number;
  /** Share of steps whose browser goes silent past the claim lease after acting, then reports. */
  lateRate?: number;
  /** Share of steps whose browser goes silent mid-step and never reports (the claim lapses). */
  silenceRate?: number;
  /** Share of steps given back after looking (`verified_absent`). */
  releaseRate?: number;
  /** How long a silent browser stays away (s): past the claim lease so the claim lapses. */
  silenceSeconds?: number;
  /** This build checks before acting, so it may be handed `resuming` steps. */
  verifyFirst?: boolean;
  /** A result without a definitive answer is retried this long (ms). */
  reportGiveUpMs?: number;
  log?: SimLog;
  random?: () => number;
}

export interface BrowserCounters {
  checkIns: number;
  checkInErrors: number;
  leaseGranted: number;
  leaseDenied: number;
  claims: number;
  claimsEmpty: number;
  /** Empty claim answers by the reason they gave. */
  emptyReasons: Record<string, number>;
  claimsRefused: number;
  claimErrors: number;
  /** Every result copy posted, by its final HTTP status ('0': no answer). */
  reports: Record<string, number>;
  reportRetries: number;
  duplicates: number;
  stale: number;
  late: number;
  silences: number;
  lostClaims: number;
  releases: number;
  /** Claims whose own result settled the step, by the status reported. */
  settled: { succeeded: number; failed: number; skipped: number };
  /** Claims whose result was refused: the claim was no longer current. */
  refused: number;
  accountMismatch: number;
}

export function emptyCounters(): BrowserCounters {
  return {
    checkIns: 0,
    checkInErrors: 0,
    leaseGranted: 0,
    leaseDenied: 0,
    claims: 0,
    claimsEmpty: 0,
    emptyReasons: {},
    claimsRefused: 0,
    claimErrors: 0,
    reports: {},
    reportRetries: 0,
    duplicates: 0,
    stale: 0,
    late: 0,
    silences: 0,
    lostClaims: 0,
    releases: 0,
    settled: { succeeded: 0, failed: 0, skipped: 0 },
    refused: 0,
    accountMismatch: 0,
  };
}

export function sumCounters(all: BrowserCounters[]): BrowserCounters {
  const total = emptyCounters();
  for (const c of all) {
    for (const key of Object.keys(total) as (keyof BrowserCounters)[]) {
      const value = c[key];
      if (typeof value === 'number') (total[key] as number) += value;
    }
    for (const [status, n] of Object.entries(c.reports)) total.reports[status] = (total.reports[status] ?? 0) + n;
    for (const [reason, n] of Object.entries(c.emptyReasons))
      total.emptyReasons[reason] = (total.emptyReasons[reason] ?? 0) + n;
    for (const status of ['succeeded', 'failed', 'skipped'] as const) total.settled[status] += c.settled[status];
  }
  return total;
}

export function formatCounters(c: BrowserCounters): string {
  const reports = Object.entries(c.reports)
    .sort(([a], [b]) => Number(a) - Number(b))
    .map(([status, n]) => `${status === '0' ? 'no answer' : status}: ${n}`)
    .join(', ');
  return [
    `check-ins          ${c.checkIns} (${c.checkInErrors} without a 200; lease granted ${c.leaseGranted}, held elsewhere ${c.leaseDenied})`,
    `claims             ${c.claims} handed out, ${c.claimsEmpty} empty${
      c.claimsEmpty
        ? ` (${Object.entries(c.emptyReasons)
            .map(([r, n]) => `${r} ${n}`)
            .join(', ')})`
        : ''
    }, ` + `${c.claimsRefused} refused, ${c.claimErrors} without an answer`,
    `settled by sims    succeeded ${c.settled.succeeded}, failed ${c.settled.failed}, skipped ${c.settled.skipped}; results refused ${c.refused}`,
    `result posts       ${reports || 'none'} (${c.reportRetries} retries)`,
    `misbehaviours      duplicates ${c.duplicates}, stale ${c.stale}, late ${c.late}, silences ${c.silences}, lost claims ${c.lostClaims}, releases ${c.releases}`,
    ...(c.accountMismatch
      ? [`account mismatch   ${c.accountMismatch} browser(s) stopped (signed in as another identity)`]
      : []),
  ].join('\n');
}

/** What the browser did with a step. */
type Act =
  | { kind: 'report'; report: ResultBody; late: boolean }
  | { kind: 'release'; reason: 'verified_absent' | 'reopen_paused' }
  | { kind: 'abandon'; fate: 'lost' | 'silent' | 'stopped' };

/** A claim being run: the log record plus what its check-ins learnt. */
interface LiveClaim {
  step: BrowserStep;
  verification: { mode: 'verify_then_act' | 'verify_only' } | null;
  record: ClaimRecord;
  lost: boolean;
  /** The browser stopped checking in (silence or a late report): the renewals stop too. */
  quiet: boolean;
  /** Acting, not yet reporting: a `lost` answer now means the claim lapsed under a running step. */
  acting: boolean;
  /** Wakes the run when a check-in says the claim is lost. */
  lostSignal: AbortController;
  done: AbortController;
}

const defaults = {
  maxPollSeconds: 15,
  runMs: [500, 4000] as [number, number],
  renewEveryMs: 5000,
  failRate: 0.1,
  skipRate: 0.05,
  duplicateRate: 0,
  maxCopies: 5,
  staleRate: 0,
  lateRate: 0,
  silenceRate: 0,
  releaseRate: 0,
  silenceSeconds: claimLeaseSeconds + 5,
  verifyFirst: true,
  reportGiveUpMs: 180_000,
};

type Settings = typeof defaults & Omit<BrowserOptions, keyof typeof defaults>;

export class SimBrowser {
  readonly browserId: string;
  readonly label: string;
  readonly counters = emptyCounters();
  readonly log: SimLog;
  /** The last agent state a check-in answered. */
  lastState: AgentState | null = null;

  private readonly o: Settings;
  /** The options' client, its requests cut short when the browser halts. */
  private readonly client: AgentClient;
  private readonly random: () => number;
  private readonly leaseNonce: string;
  private stopping = false;
  /** Wakes idle waits when the browser is asked to stop. */
  private readonly idle = new AbortController();
  /** Cuts a running step short too (Ctrl-C). */
  private readonly halted = new AbortController();
  private silentUntil = 0;
  private loopDone: Promise<void> | null = null;

  constructor(options: BrowserOptions) {
    this.o = {
      ...defaults,
      ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)),
    } as Settings;
    for (const rate of [
      'failRate',
      'skipRate',
      'duplicateRate',
      'staleRate',
      'lateRate',
      'silenceRate',
      'releaseRate',
    ] as const) {
      if (!(this.o[rate] >= 0 && this.o[rate] <= 1)) throw new Error(`${rate} must be between 0 and 1`);
    }
    if (this.o.failRate + this.o.skipRate > 1) throw new Error('failRate + skipRate must be at most 1');
    this.random = options.random ?? Math.random;
    this.browserId = options.browserId ?? randomUUID();
    this.label = options.label ?? `Sim ${this.browserId.slice(0, 8)}`;
    this.leaseNonce = options.leaseNonce ?? `sim-${this.browserId.replaceAll('-', '').slice(0, 24)}`;
    this.log = options.log ?? new SimLog();
    this.client = options.client.withSignal(this.halted.signal);
  }

  start(): this {
    this.loopDone ??= this.loop();
    return this;
  }

  /** Settles when the browser's loop has ended (stopped, or a hard stop such as an account mismatch). */
  whenDone(): Promise<void> {
    return this.loopDone ?? Promise.resolve();
  }

  /** Stops checking in and claiming; a step under way is finished and reported first. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.idle.abort();
    await this.loopDone;
  }

  /** Stops at once, abandoning a step under way (it lapses on the server). */
  async halt(): Promise<void> {
    this.stopping = true;
    this.idle.abort();
    this.halted.abort();
    await this.loopDone;
  }

  private async loop(): Promise<void> {
    let failures = 0;
    let stateSet = false;
    while (!this.stopping) {
      const quietFor = this.silentUntil - Date.now();
      if (quietFor > 0) {
        await this.wait(quietFor, this.idle.signal);
        continue;
      }
      const answer = await this.checkIn(null);
      if (answer.status !== 200 || !answer.body) {
        failures += 1;
        await this.wait(
          answer.retryAfterSeconds ? answer.retryAfterSeconds * 1000 : Math.min(250 * 2 ** failures, 5000),
          this.idle.signal,
        );
        continue;
      }
      failures = 0;
      const state = answer.body;
      this.lastState = state;
      if (state.account_mismatch) {
        // A hard stop: this browser is signed in as somebody else.
        this.counters.accountMismatch += 1;
        return;
      }
      if (!stateSet)
        stateSet =
          (await this.client.setState({ browser_id: this.browserId, lease_nonce: this.leaseNonce })).status === 200;
      if (state.lease_granted) this.counters.leaseGranted += 1;
      else this.counters.leaseDenied += 1;
      if (state.lease_granted && (state.queued_count > 0 || state.unpaced_waiting) && !this.stopping) {
        const claimed = await this.claimNext();
        if (claimed) {
          await this.runStep(claimed.answer, claimed.body);
          continue;
        }
      }
      await this.wait(Math.min(Math.max(state.poll_after_seconds, 1), this.o.maxPollSeconds) * 1000, this.idle.signal);
    }
  }

  private async checkIn(running: { action_id: string; claimed_at: string } | null) {
    this.counters.checkIns += 1;
    const answer = await this.client.heartbeat({
      browser_id: this.browserId,
      browser_label: this.label,
      extension_version: this.o.extensionVersion ?? '2.0.0-sim',
      identity: this.o.identity,
      lease_nonce: this.leaseNonce,
      running,
    });
    if (answer.status !== 200) this.counters.checkInErrors += 1;
    return answer;
  }

  private async claimNext(): Promise<{
    answer: AgentAnswer<ClaimAnswer>;
    body: ClaimAnswer & { step: BrowserStep };
  } | null> {
    const answer = await this.client.claim({ browser_id: this.browserId, verify_first: this.o.verifyFirst });
    if (answer.status === 200 && answer.body) {
      if (answer.body.step?.claimed_at) {
        this.counters.claims += 1;
        return { answer, body: answer.body as ClaimAnswer & { step: BrowserStep } };
      }
      this.counters.claimsEmpty += 1;
      const reason = answer.body.reason ?? 'none';
      this.counters.emptyReasons[reason] = (this.counters.emptyReasons[reason] ?? 0) + 1;
    } else if (answer.status === 409) {
      this.counters.claimsRefused += 1;
    } else {
      this.counters.claimErrors += 1;
    }
    return null;
  }

  private async runStep(answer: AgentAnswer<ClaimAnswer>, body: ClaimAnswer & { step: BrowserStep }): Promise<void> {
    const step = body.step;
    const claimedAt = Date.parse(step.claimed_at!);
    const record = this.log.addClaim({
      stepId: step.id,
      accountId: step.account_id,
      browser: this.label,
      kind: step.kind,
      metered: step.metered,
      claimedAt,
      claimedAtIso: step.claimed_at!,
      answeredAt: answer.answeredAt,
      heldUntil: claimedAt,
      lastRenewalSentAt: claimedAt,
      ranUntil: null,
      fate: 'running',
      result: null,
      settledAt: null,
    });
    const verification = body.verification ?? null;
    const live: LiveClaim = {
      step,
      verification,
      record,
      lost: false,
      quiet: false,
      acting: true,
      lostSignal: new AbortController(),
      done: new AbortController(),
    };
    const renewing = this.keepRenewing(live);
    try {
      const act = await this.act(live);
      live.acting = false;
      record.ranUntil ??= Date.now();
      if (act.kind === 'abandon') {
        record.fate = act.fate;
        if (act.fate === 'silent') this.silentUntil = Date.now() + this.o.silenceSeconds * 1000;
      } else if (act.kind === 'release') {
        await this.giveBack(live, act.reason);
      } else {
        record.result = { status: act.report.status, error_code: act.report.error_code ?? null };
        await this.postResult(live, act.report, act.late);
      }
    } finally {
      live.done.abort();
      await renewing;
    }
  }

  /**
   * Runs the claimed step as the extension would and decides what it did: the one place that
   * acts. A resuming step comes with a verification: `verify_only` looks and either reports the
   * action done or gives the step back; `verify_then_act` looks, then acts if it is not done.
   */
  private async act(live: LiveClaim): Promise<Act> {
    const r = this.random;
    const [min, max] = this.o.runMs;
    const duration = Math.round(min + r() * (max - min));
    const started = Date.now();
    if (r() < this.o.silenceRate) {
      // Gone mid-step (tab crashed, laptop shut): no result, no more check-ins for a while.
      await this.work(live, duration / 2);
      this.counters.silences += 1;
      live.quiet = true;
      return { kind: 'abandon', fate: 'silent' };
    }
    const look = live.verification !== null || r() < this.o.releaseRate;
    if (look) {
      if (!(await this.work(live, duration / 3))) return { kind: 'abandon', fate: live.lost ? 'lost' : 'stopped' };
      const alreadyDone = live.verification !== null && r() < 0.5;
      if (alreadyDone)
        return { kind: 'report', report: this.result(live.step, 'succeeded', Date.now() - started), late: false };
      if (live.verification?.mode === 'verify_only' || live.verification === null)
        return { kind: 'release', reason: 'verified_absent' };
    }
    if (!(await this.work(live, duration))) return { kind: 'abandon', fate: live.lost ? 'lost' : 'stopped' };
    // The irreversible click happens here. A build that asks the server for a commit grant
    // asks just before it, and abandons the step when refused.
    const x = r();
    const status = x < this.o.failRate ? 'failed' : x < this.o.failRate + this.o.skipRate ? 'skipped' : 'succeeded';
    const report = this.result(live.step, status, Date.now() - started);
    if (r() < this.o.lateRate) {
      // Acted, then went quiet past the claim lease: the result arrives after the claim lapsed.
      this.counters.late += 1;
      live.quiet = true;
      live.acting = false;
      live.record.ranUntil = Date.now();
      if (!(await this.wait(this.o.silenceSeconds * 1000, this.idle.signal)))
        return { kind: 'abandon', fate: 'stopped' };
      return { kind: 'report', report, late: true };
    }
    return { kind: 'report', report, late: false };
  }

  private result(step: BrowserStep, status: ResultBody['status'], durationMs: number): ResultBody {
    const base = {
      claimed_at: step.claimed_at,
      duration_ms: durationMs,
      diagnostic: { before_commit: false, config_version: this.lastState?.config_version ?? 1 },
    };
    if (status === 'failed') {
      const code = browserErrorCodes[Math.floor(this.random() * browserErrorCodes.length)]!;
      return { ...base, status, error_code: code, error_message: `Simulated ${code}` };
    }
    return { ...base, status, outcome: { kind: step.kind, page_loaded: true } };
  }

  /** Runs for `ms`, false when the claim was lost or the browser halted meanwhile. */
  private async work(live: LiveClaim, ms: number): Promise<boolean> {
    const ran = await this.wait(ms, AbortSignal.any([live.lostSignal.signal, this.halted.signal]));
    return ran && !live.lost;
  }

  /** Check-ins naming the running claim until the step is done: they renew its lease. */
  private async keepRenewing(live: LiveClaim): Promise<void> {
    const stop = AbortSignal.any([live.done.signal, this.halted.signal]);
    const running = { action_id: live.step.id, claimed_at: live.step.claimed_at! };
    while (await this.wait(this.o.renewEveryMs, stop)) {
      if (live.quiet) return;
      live.record.lastRenewalSentAt = Date.now();
      const answer = await this.checkIn(running);
      if (live.quiet || stop.aborted) return;
      if (answer.status !== 200 || !answer.body) continue;
      this.lastState = answer.body;
      if (answer.body.running_claim === 'renewed')
        live.record.heldUntil = Math.max(live.record.heldUntil, answer.sentAt);
      // While the result is on its way a `lost` answer may just be the settle landing first.
      if (answer.body.running_claim === 'lost' && live.acting) {
        this.counters.lostClaims += 1;
        live.lost = true;
        live.lostSignal.abort();
        return;
      }
    }
  }

  private async giveBack(live: LiveClaim, reason: 'verified_absent' | 'reopen_paused') {
    const answer = await this.withRetry(() =>
      this.client.release(live.step.id, { claimed_at: live.step.claimed_at!, reason }),
    );
    if (answer.status === 200 && answer.body) {
      this.counters.releases += 1;
      live.record.fate = 'released';
      // The release's own write time: the claim was current until then.
      const queuedAt = answer.body.queued_at ? Date.parse(answer.body.queued_at) : answer.sentAt;
      live.record.heldUntil = Math.max(live.record.heldUntil, queuedAt);
    } else {
      live.record.fate = answer.status === 409 ? 'refused' : 'unanswered';
    }
  }

  /**
   * Posts the result, as a browser retrying over a flaky connection would: sometimes several
   * copies at once, sometimes also copies naming an earlier claim.
   */
  private async postResult(live: LiveClaim, report: ResultBody, late: boolean) {
    const r = this.random;
    const copies = r() < this.o.duplicateRate ? 2 + Math.floor(r() * (this.o.maxCopies - 1)) : 1;
    const staleCopies = r() < this.o.staleRate ? 1 : 0;
    this.counters.duplicates += copies - 1;
    this.counters.stale += staleCopies;
    const posts: Promise<ReportRecord>[] = [];
    for (let i = 0; i < copies; i += 1) posts.push(this.postOnce(live, report, i === 0 ? 'first' : 'duplicate', late));
    for (let i = 0; i < staleCopies; i += 1) {
      const earlier = new Date(live.record.claimedAt - 1000 * (1 + Math.floor(r() * 600))).toISOString();
      posts.push(this.postOnce(live, { ...report, claimed_at: earlier }, 'stale', late));
    }
    const own = (await Promise.all(posts)).filter((p) => p.copy !== 'stale');
    const accepted = own.find((p) => p.http === 200 && p.answer);
    if (accepted?.answer?.finished_at) {
      live.record.settledAt = Date.parse(accepted.answer.finished_at);
      this.counters.settled[report.status] += 1;
      // Its settle wrote while the claim was current, unless the claim had lapsed first.
      if (!late) live.record.heldUntil = Math.max(live.record.heldUntil, live.record.settledAt);
    } else if (own.some((p) => p.http === 409)) {
      this.counters.refused += 1;
    }
    live.record.fate = late
      ? 'late'
      : accepted
        ? 'settled'
        : own.some((p) => p.http === 409)
          ? 'refused'
          : 'unanswered';
  }

  private async postOnce(live: LiveClaim, body: ResultBody, copy: ReportCopy, late: boolean): Promise<ReportRecord> {
    const started = Date.now();
    let attempts = 0;
    const answer = await this.withRetry(() => {
      attempts += 1;
      return this.client.report(live.step.id, body);
    });
    const step = answer.status === 200 ? answer.body : null;
    const record: ReportRecord = {
      stepId: live.step.id,
      accountId: live.step.account_id,
      browser: this.label,
      copy,
      late,
      namedClaim: body.claimed_at ?? null,
      status: body.status,
      http: answer.status,
      attempts,
      sentAt: started,
      answeredAt: answer.answeredAt,
      detail: answer.detail,
      answer: step
        ? {
            status: step.status,
            finished_at: step.finished_at,
            claimed_at: step.claimed_at,
            error_code: step.error_code,
          }
        : null,
    };
    this.log.addReport(record);
    this.counters.reports[String(answer.status)] = (this.counters.reports[String(answer.status)] ?? 0) + 1;
    return record;
  }

  /** Retries while there is no definitive answer (no answer, 429, 5xx), with backoff. */
  private async withRetry<T>(call: () => Promise<AgentAnswer<T>>): Promise<AgentAnswer<T>> {
    const started = Date.now();
    for (let attempt = 1; ; attempt += 1) {
      const answer = await call();
      const transient = answer.status === 0 || answer.status === 429 || answer.status >= 500;
      if (!transient || Date.now() - started > this.o.reportGiveUpMs) return answer;
      this.counters.reportRetries += 1;
      const backoff = answer.retryAfterSeconds
        ? answer.retryAfterSeconds * 1000
        : Math.min(250 * 2 ** (attempt - 1), 3000);
      if (!(await this.wait(backoff, this.halted.signal))) return answer;
    }
  }

  /** Sleeps; false when woken early by the signal. */
  private wait(ms: number, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    if (ms <= 0) return Promise.resolve(true);
    return sleep(ms, undefined, { signal }).then(
      () => true,
      () => false,
    );
  }
}
