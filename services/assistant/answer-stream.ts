/**
 * An answer's event stream inside one API process. The turn's activities write each part to
 * Postgres and NOTIFY the message id (store/assistant/parts.ts); this process keeps one LISTEN
 * connection and wakes the streams of that message, which read the new parts themselves. A stream
 * is pulled (an async generator behind a Readable), so a slow client holds nothing in memory, and
 * a client that reconnects with Last-Event-ID reads the rest from Postgres on any API process.
 */
import { Readable } from 'node:stream';
import type { Sql } from '../../db/sql.js';
import { isLastPart, sseDone, sseEvent, type StreamPart } from '../../domain/assistant/stream.js';
import { assistantPartsChannel, readParts } from '../../store/assistant/parts.js';

export interface AnswerStreamOptions {
  /** A comment line this often keeps proxies from closing a quiet stream. */
  heartbeatMs?: number;
}

export class AnswerStreamHub {
  /** Per watched message: how many NOTIFYs arrived, and who waits for the next. */
  private readonly watched = new Map<string, { version: number; streams: number; waiters: Set<() => void> }>();
  private listening: Promise<{ unlisten: () => Promise<void> }> | undefined;
  private readonly heartbeatMs: number;
  private readonly closing = new AbortController();

  constructor(
    private readonly sql: Sql,
    options: AnswerStreamOptions = {},
  ) {
    this.heartbeatMs = options.heartbeatMs ?? 15_000;
  }

  private listen() {
    this.listening ??= this.sql.listen(assistantPartsChannel, (messageId) => this.wake(messageId));
    return this.listening;
  }

  private wake(messageId: string) {
    const entry = this.watched.get(messageId);
    if (!entry) return;
    entry.version += 1;
    for (const wake of entry.waiters) wake();
    entry.waiters.clear();
  }

  /** Resolves once the message's version passes `seen` (at once when it already has), at the heartbeat, or at the end. */
  private waitPast(messageId: string, seen: number, signal: AbortSignal): Promise<'woken' | 'heartbeat'> {
    const entry = this.watched.get(messageId)!;
    if (entry.version > seen || signal.aborted) return Promise.resolve('woken');
    return new Promise((resolve) => {
      const done = (why: 'woken' | 'heartbeat') => {
        clearTimeout(timer);
        entry.waiters.delete(wake);
        signal.removeEventListener('abort', wake);
        resolve(why);
      };
      const wake = () => done('woken');
      const timer = setTimeout(() => done('heartbeat'), this.heartbeatMs);
      entry.waiters.add(wake);
      signal.addEventListener('abort', wake, { once: true });
    });
  }

  /**
   * The answer's events after `afterSeq`, live until its last part, then `[DONE]`. `first` is an
   * event the caller knows is stored (the `start` it just wrote), sent before anything is read.
   */
  async open(
    messageId: string,
    afterSeq: number,
    signal: AbortSignal,
    first?: { seq: number; part: StreamPart },
  ): Promise<Readable> {
    await this.listen();
    const stop = AbortSignal.any([signal, this.closing.signal]);
    const entry = this.watched.get(messageId) ?? { version: 0, streams: 0, waiters: new Set<() => void>() };
    this.watched.set(messageId, entry);
    entry.streams += 1;
    const release = () => {
      entry.streams -= 1;
      if (entry.streams === 0) this.watched.delete(messageId);
    };
    const sql = this.sql;
    const waitPast = (seen: number) => this.waitPast(messageId, seen, stop);
    async function* events() {
      let cursor = afterSeq;
      if (first) {
        yield sseEvent(first.seq, first.part);
        cursor = Math.max(cursor, first.seq);
      }
      try {
        while (!stop.aborted) {
          // The version before the read: a part written after it wakes the wait below at once.
          const seen = entry.version;
          const parts = await readParts(sql, messageId, cursor);
          for (const { seq, part } of parts) {
            cursor = seq;
            yield sseEvent(seq, part);
            if (isLastPart(part)) {
              yield sseDone;
              return;
            }
          }
          if (parts.length > 0) continue;
          if ((await waitPast(seen)) === 'heartbeat') yield ': ping\n\n';
        }
      } finally {
        release();
      }
    }
    return Readable.from(events(), { objectMode: false });
  }

  async close() {
    this.closing.abort();
    const listening = this.listening;
    this.listening = undefined;
    if (listening) await (await listening).unlisten().catch(() => {});
  }
}
