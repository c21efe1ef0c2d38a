/**
 * The grid's change feed inside one API process. The triggers of migration 011 log every row and
 * cell write and NOTIFY the table's id once per transaction; this process keeps one LISTEN
 * connection (postgres.js `sql.listen`) and, for each table somebody watches, reads each new
 * stretch of the log once and wakes that table's streams. A stream behind that stretch (a
 * reconnect with Last-Event-ID, a client reading slowly) reads the log itself at its own pace, so
 * nothing piles up in memory for a client that does not read: a stream is pulled, never pushed.
 */
import { Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
import type { Sql } from '../../db/sql.js';
import {
  tableChangeRetentionHours,
  tableEventsHeartbeatSeconds,
  tableEventsRetryMs,
} from '../../domain/tables/events.js';
import {
  eventFrame,
  feedPosition,
  pingTableChanges,
  pruneTableChanges,
  readChanges,
  tableChangesChannel,
  type Change,
} from '../../store/tables/changes.js';

export interface TableEventHubOptions {
  heartbeatMs?: number;
  /** Changes one read takes, and how many a table's feed keeps (smaller in tests). */
  pageSize?: number;
  keptMax?: number;
  /** How often a process with streams checks that its LISTEN connection still hears. */
  listenCheckMs?: number;
  pruneEveryMs?: number;
}

/** What a table's feed keeps for streams that are up to date: the newest changes, within both bounds. */
const keptCharsMax = 4 * 1024 * 1024;

/** The changes of one table this process has read, and the streams waiting for more. */
class TableFeed {
  streams = 0;
  /** Bumped whenever the feed read something: a stream that saw another value looks again. */
  version = 0;
  /** Every change of the table up to here has been read... */
  cursor = 0;
  /** ...and `kept` holds every one in (keptFrom, cursor]. Until the first read, nothing. */
  keptFrom = Number.POSITIVE_INFINITY;
  kept: Change[] = [];
  private keptChars = 0;
  started = false;
  pumping: Promise<void> | undefined;
  again = false;
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly tableId: string,
    private readonly keptMax: number,
  ) {}

  /** The changes after `position`, or undefined when the feed does not hold them all. */
  after(position: number): Change[] | undefined {
    if (position < this.keptFrom) return undefined;
    return this.kept.filter((c) => c.id > position);
  }

  add(changes: Change[]) {
    for (const change of changes) {
      this.kept.push(change);
      this.keptChars += change.frame.length;
      this.cursor = change.id;
    }
    while (this.kept.length > this.keptMax || this.keptChars > keptCharsMax) {
      const dropped = this.kept.shift()!;
      this.keptChars -= dropped.frame.length;
      this.keptFrom = dropped.id;
    }
    this.wake();
  }

  restart(cursor: number) {
    this.cursor = cursor;
    this.keptFrom = cursor;
    this.kept = [];
    this.keptChars = 0;
    this.wake();
  }

  wake() {
    this.version += 1;
    for (const waiter of [...this.waiters]) waiter();
  }

  /** True when the feed moved past `version`, false after `timeoutMs` or when aborted. */
  changed(version: number, timeoutMs: number, signal: AbortSignal): Promise<boolean> {
    if (this.version !== version || signal.aborted) return Promise.resolve(this.version !== version);
    return new Promise((resolve) => {
      const done = (moved: boolean) => {
        clearTimeout(timer);
        this.waiters.delete(onWake);
        signal.removeEventListener('abort', onAbort);
        resolve(moved);
      };
      const onWake = () => done(true);
      const onAbort = () => done(false);
      const timer = setTimeout(done, timeoutMs, false);
      this.waiters.add(onWake);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }
}

type Start = { position: number; event: 'ready' } | { position: number; event: 'reset'; reason: 'expired' | 'unknown' };

export class TableEventHub {
  private readonly feeds = new Map<string, TableFeed>();
  private readonly closing = new AbortController();
  private readonly heartbeatMs: number;
  private readonly listenCheckMs: number;
  private readonly pruneEveryMs: number;
  private readonly pageSize: number;
  private readonly keptMax: number;
  private listening: Promise<{ unlisten: () => Promise<void> }> | undefined;
  private listenCheck: NodeJS.Timeout | undefined;
  private pruning: NodeJS.Timeout | undefined;
  private heardAt = 0;
  private pingedAt: number | undefined;

  constructor(
    private readonly sql: Sql,
    private readonly log: FastifyBaseLogger,
    options: TableEventHubOptions = {},
  ) {
    this.heartbeatMs = options.heartbeatMs ?? tableEventsHeartbeatSeconds * 1000;
    this.listenCheckMs = options.listenCheckMs ?? 30_000;
    this.pruneEveryMs = options.pruneEveryMs ?? 10 * 60_000;
    // An entry lists up to 1000 rows or cells, so a page of 50 stays a few MB.
    this.pageSize = options.pageSize ?? 50;
    this.keptMax = options.keptMax ?? 500;
  }

  /** Streams open now on a table (every table when none is named). */
  streamCount(tableId?: string): number {
    if (tableId !== undefined) return this.feeds.get(tableId.toLowerCase())?.streams ?? 0;
    return [...this.feeds.values()].reduce((n, f) => n + f.streams, 0);
  }

  /**
   * The event stream of a table the caller may read: its first event (`ready`, or `reset` for a
   * Last-Event-ID whose changes are no longer kept), then every change after that, with comment
   * lines between them when quiet. It ends when `signal` aborts, the client goes, or, with
   * `once`, when the changes already made are sent.
   */
  async open(
    tableId: string,
    options: { lastEventId?: number; once: boolean; signal: AbortSignal },
  ): Promise<Readable> {
    const table = tableId.toLowerCase();
    // Listening before the start is read: a change committed after it is then always heard.
    if (!options.once && !this.closing.signal.aborted) await this.listen();
    const start = await this.start(table, options.lastEventId);
    const stopped = new AbortController();
    const signal = AbortSignal.any([options.signal, stopped.signal, this.closing.signal]);
    // One event ahead at most: what the client does not read stays in the log, not here.
    const stream = Readable.from(this.events(table, start, options.once, signal), { highWaterMark: 1 });
    stream.once('close', () => stopped.abort());
    return stream;
  }

  private async start(tableId: string, lastEventId: number | undefined): Promise<Start> {
    const at = await feedPosition(this.sql, tableId);
    const now = Math.max(at.latest, at.pruned);
    if (lastEventId === undefined) return { position: now, event: 'ready' };
    if (lastEventId < at.pruned) return { position: now, event: 'reset', reason: 'expired' };
    if (lastEventId > at.issued) return { position: now, event: 'reset', reason: 'unknown' };
    return { position: lastEventId, event: 'ready' };
  }

  private async *events(tableId: string, start: Start, once: boolean, signal: AbortSignal): AsyncGenerator<string> {
    const feed = once ? undefined : this.join(tableId);
    try {
      const first = start.event === 'ready' ? { table_id: tableId } : { table_id: tableId, reason: start.reason };
      yield eventFrame(start.position, start.event, JSON.stringify(first), tableEventsRetryMs);
      let position = start.position;
      while (!signal.aborted) {
        const version = feed?.version ?? 0;
        let changes = feed?.after(position);
        if (!changes) {
          const page = await readChanges(this.sql, tableId, position, this.pageSize);
          if (page.pruned > position) {
            // Retention removed changes this stream had not sent yet.
            position = Math.max(page.pruned, (await feedPosition(this.sql, tableId)).latest);
            yield eventFrame(position, 'reset', JSON.stringify({ table_id: tableId, reason: 'expired' }));
            continue;
          }
          changes = page.changes;
        }
        for (const change of changes) {
          yield change.frame;
          position = change.id;
        }
        if (changes.length > 0) continue;
        if (!feed) return; // once: everything already made is sent
        if (!(await feed.changed(version, this.heartbeatMs, signal)) && !signal.aborted) yield ': keep-alive\n\n';
      }
    } finally {
      if (feed) this.leave(feed);
    }
  }

  private join(tableId: string): TableFeed {
    let feed = this.feeds.get(tableId);
    if (!feed) {
      feed = new TableFeed(tableId, this.keptMax);
      this.feeds.set(tableId, feed);
      void this.pump(feed);
    }
    feed.streams += 1;
    return feed;
  }

  private leave(feed: TableFeed) {
    feed.streams -= 1;
    if (feed.streams === 0 && this.feeds.get(feed.tableId) === feed) this.feeds.delete(feed.tableId);
  }

  /** Reads what is new for a table, one read at a time; a wake during a read reads again after it. */
  private pump(feed: TableFeed): Promise<void> {
    if (feed.pumping) {
      feed.again = true;
      return feed.pumping;
    }
    feed.pumping = (async () => {
      try {
        do {
          feed.again = false;
          await this.read(feed);
        } while (feed.again && !this.closing.signal.aborted);
      } catch (error) {
        this.log.warn({ err: error, tableId: feed.tableId }, 'table change feed: read failed; retrying');
        setTimeout(() => this.feeds.get(feed.tableId) === feed && void this.pump(feed), 1000).unref();
      } finally {
        feed.pumping = undefined;
      }
    })();
    return feed.pumping;
  }

  private async read(feed: TableFeed) {
    if (!feed.started) {
      // A new feed starts at the table's newest change; streams behind it read the log themselves.
      const at = await feedPosition(this.sql, feed.tableId);
      feed.started = true;
      feed.restart(Math.max(at.latest, at.pruned));
    }
    for (;;) {
      const page = await readChanges(this.sql, feed.tableId, feed.cursor, this.pageSize);
      if (page.pruned > feed.cursor) {
        feed.restart(page.pruned);
        continue;
      }
      if (page.changes.length > 0) feed.add(page.changes);
      if (page.changes.length < this.pageSize) return;
    }
  }

  private listen() {
    this.listening ??= this.sql
      .listen(
        tableChangesChannel,
        (payload) => this.notified(payload),
        // Called again when postgres.js reconnects: what was notified meanwhile is read now.
        () => {
          for (const feed of this.feeds.values()) void this.pump(feed);
        },
      )
      .then((handle) => {
        this.listenCheck ??= setInterval(() => void this.checkListener(), this.listenCheckMs).unref();
        return handle;
      })
      .catch((error: unknown) => {
        this.listening = undefined;
        throw error;
      });
    return this.listening;
  }

  private notified(payload: string) {
    this.heardAt = Date.now();
    const feed = this.feeds.get(payload);
    if (feed && !this.closing.signal.aborted) void this.pump(feed);
  }

  /**
   * postgres.js listens again once after its LISTEN connection drops; should that fail (Postgres
   * restarting), nothing would be heard again. So while streams are open, the process notifies
   * itself now and then, and one of its own pings not heard means: listen anew and read.
   */
  private async checkListener() {
    if (this.feeds.size === 0 || this.closing.signal.aborted) return;
    try {
      if (this.pingedAt !== undefined && this.heardAt < this.pingedAt) {
        this.log.warn('table change feed: LISTEN connection silent; listening again');
        // The silent connection is being replaced: a failure to end its LISTEN changes nothing.
        const handle = await this.listening?.catch(() => undefined);
        this.listening = undefined;
        await handle?.unlisten().catch(() => {});
        await this.listen();
        for (const feed of this.feeds.values()) void this.pump(feed);
      }
      this.pingedAt = Date.now();
      await pingTableChanges(this.sql);
    } catch (error) {
      this.log.warn({ err: error }, 'table change feed: listen check failed');
    }
  }

  /** Retention: a cheap delete every few minutes (and at start) in every API process. */
  startPruning() {
    const prune = () =>
      pruneTableChanges(this.sql, tableChangeRetentionHours).catch((error: unknown) =>
        this.log.warn({ err: error }, 'table change feed: pruning failed'),
      );
    void prune();
    this.pruning ??= setInterval(() => void prune(), this.pruneEveryMs).unref();
  }

  /** Ends every stream (so the server can close) and stops listening. */
  async close() {
    this.closing.abort();
    clearInterval(this.listenCheck);
    clearInterval(this.pruning);
    // Closing: the connection goes with the pool, so an UNLISTEN that fails leaves nothing behind.
    const handle = await this.listening?.catch(() => undefined);
    await handle?.unlisten().catch(() => {});
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The process's change feed (buildApp decorates the app with it). */
    tableEvents: TableEventHub;
  }
}
