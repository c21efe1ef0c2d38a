/**
 * The extension protocol over real HTTP, as the browser extension speaks it: the account's
 * connection token in `Authorization: Bearer`, JSON in and out. Every call answers; a request
 * that got no HTTP answer (refused, reset, timed out) reads as status 0, so the caller decides
 * whether to retry instead of catching.
 */
import type { z } from 'zod';
import type {
  AgentClaimSchema,
  AgentHeartbeatSchema,
  AgentReleaseSchema,
  AgentSetStateSchema,
  AgentState,
  ResultReportSchema,
} from '../domain/pnet/agent.js';
import type { BrowserStep } from '../domain/pnet/steps.js';
import type { Wait } from '../domain/pnet/pacing.js';

export type HeartbeatBody = z.input<typeof AgentHeartbeatSchema>;
export type SetStateBody = z.input<typeof AgentSetStateSchema>;
export type ClaimBody = z.input<typeof AgentClaimSchema>;
export type ResultBody = z.input<typeof ResultReportSchema>;
export type ReleaseBody = z.input<typeof AgentReleaseSchema>;

export interface ClaimAnswer {
  step: BrowserStep | null;
  /** Set when the step handed out is `resuming`: look before acting. */
  verification?: { mode: 'verify_then_act' | 'verify_only'; commit_granted_at: string | null } | null;
  reason: Wait['reason'] | null;
  wait: Wait | null;
}

export interface AgentAnswer<T> {
  /** The HTTP status, or 0 when no answer came back. */
  status: number;
  /** The parsed body of a 2xx answer; `detail` of an error body. */
  body: T | null;
  detail: string | null;
  /** Client clock: when the request left and when its answer (or the failure) arrived. */
  sentAt: number;
  answeredAt: number;
  retryAfterSeconds: number | null;
}

export interface AgentClientOptions {
  apiUrl: string;
  token: string;
  /** A claim or a result waits on the step's workflow, which waits on a worker: allow for a restart. */
  timeoutMs?: number;
  /** Aborts every request in flight (a simulator halting). */
  signal?: AbortSignal;
}

export class AgentClient {
  private readonly base: string;

  constructor(private readonly options: AgentClientOptions) {
    this.base = options.apiUrl.replace(/\/+$/, '');
  }

  /** The same client, its requests also aborted by `signal`. */
  withSignal(signal: AbortSignal): AgentClient {
    return new AgentClient({
      ...this.options,
      signal: this.options.signal ? AbortSignal.any([this.options.signal, signal]) : signal,
    });
  }

  heartbeat(body: HeartbeatBody) {
    return this.post<AgentState>('/pnet/agent/heartbeat/', body);
  }

  setState(body: SetStateBody) {
    return this.post<AgentState>('/pnet/agent/state/', body);
  }

  claim(body: ClaimBody) {
    return this.post<ClaimAnswer>('/pnet/agent/claim/', body);
  }

  report(actionId: string, result: ResultBody) {
    return this.post<BrowserStep>(`/pnet/agent/actions/${actionId}/result/`, result);
  }

  release(actionId: string, body: ReleaseBody) {
    return this.post<BrowserStep>(`/pnet/agent/actions/${actionId}/release/`, body);
  }

  private async post<T>(path: string, body: unknown): Promise<AgentAnswer<T>> {
    const sentAt = Date.now();
    try {
      const response = await fetch(this.base + path, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.options.token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.any([
          AbortSignal.timeout(this.options.timeoutMs ?? 120_000),
          ...(this.options.signal ? [this.options.signal] : []),
        ]),
      });
      const text = await response.text();
      let parsed: unknown = null;
      try {
        parsed = text ? JSON.parse(text) : null;
      } catch {
        // A proxy's HTML error page: the status says enough.
      }
      const ok = response.status >= 200 && response.status < 300;
      const retryAfter = Number(response.headers.get('retry-after'));
      return {
        status: response.status,
        body: ok ? (parsed as T) : null,
        detail: ok ? null : ((parsed as { detail?: string } | null)?.detail ?? null),
        sentAt,
        answeredAt: Date.now(),
        retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter : null,
      };
    } catch (error) {
      return {
        status: 0,
        body: null,
        detail: (error as Error).message,
        sentAt,
        answeredAt: Date.now(),
        retryAfterSeconds: null,
      };
    }
  }
}
