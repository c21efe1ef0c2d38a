/**
 * Load generation for the benchmarks: an open-loop generator (arrivals at a fixed, possibly
 * ramping, rate; each latency measured from the arrival's scheduled time, so a slow server
 * cannot slow the arrivals and hide its own queueing — no coordinated omission) and a
 * closed-loop one (N workers back to back) for maximum throughput.
 */
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

export class Recorder {
  readonly latencies: number[] = [];
  errors = 0;
  statuses = new Map<number, number>();
  started = performance.now();
  ended = performance.now();

  add(ms: number, status: number) {
    this.latencies.push(ms);
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
    if (status >= 400 || status === 0) this.errors += 1;
  }

  get count() {
    return this.latencies.length;
  }

  private sorted: number[] | null = null;

  percentile(p: number): number {
    if (this.latencies.length === 0) return NaN;
    if (this.sorted?.length !== this.latencies.length) this.sorted = [...this.latencies].sort((a, b) => a - b);
    const sorted = this.sorted;
    return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
  }

  /** Completions per second over the recorded window. */
  rate(): number {
    const seconds = (this.ended - this.started) / 1000;
    return seconds > 0 ? this.count / seconds : 0;
  }

  statusSummary(): string {
    return [...this.statuses].map(([status, n]) => `${status === 0 ? 'network error' : status}×${n}`).join(' ');
  }
}

/** One request: resolves with the HTTP status (0 for a network error), never rejects. */
export type Send = (arrival: number) => Promise<number>;

/**
 * Fires `send` at `rate(t)` arrivals per second (t in seconds since the start) for `seconds`.
 * Arrivals are spaced by the rate in force, fired from a 1 ms timer; a request still in flight
 * never delays the next arrival. Resolves when every request has answered.
 */
export async function openLoop(options: {
  seconds: number;
  rate: (t: number) => number;
  send: Send;
  recorder?: Recorder;
}): Promise<Recorder> {
  const recorder = options.recorder ?? new Recorder();
  const start = performance.now();
  const end = start + options.seconds * 1000;
  const inFlight = new Set<Promise<void>>();
  let next = start;
  let arrival = 0;
  recorder.started = start;
  while (next < end) {
    const now = performance.now();
    while (next <= now && next < end) {
      const scheduled = next;
      const index = arrival;
      arrival += 1;
      const done = options.send(index).then((status) => recorder.add(performance.now() - scheduled, status));
      inFlight.add(done);
      void done.finally(() => inFlight.delete(done));
      next += 1000 / Math.max(options.rate((next - start) / 1000), 0.001);
    }
    await sleep(1);
  }
  await Promise.all(inFlight);
  recorder.ended = Math.max(end, performance.now());
  return recorder;
}

/** `workers` loops, each sending its next request as soon as the last one answered. */
export async function closedLoop(options: { seconds: number; workers: number; send: Send }): Promise<Recorder> {
  const recorder = new Recorder();
  const end = performance.now() + options.seconds * 1000;
  let arrival = 0;
  recorder.started = performance.now();
  await Promise.all(
    Array.from({ length: options.workers }, async () => {
      while (performance.now() < end) {
        const sent = performance.now();
        const status = await options.send(arrival++);
        recorder.add(performance.now() - sent, status);
      }
    }),
  );
  recorder.ended = performance.now();
  return recorder;
}
