/**
 * A token bucket per credential (API key or bearer user). Each API process keeps its own
 * buckets, so N processes allow N times the rate: the limit protects a process, and a shared
 * limit can move to Postgres when the service runs many replicas.
 */
export interface RateLimitConfig {
  /** Requests allowed per window; 0 switches the limit off. */
  limit: number;
  windowSeconds: number;
  /** The process clock (ms since the epoch) of the limiter and of the auth plugin's once-a-minute writes; Date.now when omitted (tests pass their own). */
  now?: () => number;
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();
  readonly now: () => number;
  constructor(
    private readonly config: RateLimitConfig,
    now?: () => number,
  ) {
    this.now = now ?? config.now ?? Date.now;
  }

  /** Takes one request; answers the seconds to wait when the bucket is empty. */
  take(key: string): { allowed: true } | { allowed: false; retryAfterSeconds: number } {
    if (this.config.limit <= 0) return { allowed: true };
    const ratePerMs = this.config.limit / (this.config.windowSeconds * 1000);
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.config.limit, updatedAt: now };
    bucket.tokens = Math.min(this.config.limit, bucket.tokens + (now - bucket.updatedAt) * ratePerMs);
    bucket.updatedAt = now;
    this.buckets.set(key, bucket);
    if (this.buckets.size > 100_000) this.evictFull(now, ratePerMs);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      return { allowed: true };
    }
    return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / ratePerMs / 1000)) };
  }

  private evictFull(now: number, ratePerMs: number) {
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + (now - bucket.updatedAt) * ratePerMs >= this.config.limit) this.buckets.delete(key);
    }
  }
}
