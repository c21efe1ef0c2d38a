/**
 * `COPY … FROM STDIN` as a writer of text chunks, for the statements that load many records at
 * once (store/tables/row-load.ts, store/tables/cells.ts).
 *
 * postgres.js (3.4.9) resolves the query with its stream once Postgres accepts the COPY. A refusal
 * Postgres sends after the data ended (a statement trigger, the last index inserts) then reaches
 * only the query's `reject`, and neither the stream nor the query ever settles: the writer takes
 * the refusal from there, so `write` and `end` throw it instead of waiting for good
 * (docs/decisions/060-formula-pass-writes.md).
 */
import { once } from 'node:events';
import { finished } from 'node:stream/promises';
import type { PendingQuery, Row } from 'postgres';

export interface CopyIn {
  /** Sends text, waiting while the connection drains; throws what refused or aborted the COPY. */
  write(text: string): Promise<void>;
  /** Sends the last text and ends the data; throws what Postgres refused it with. */
  end(text?: string): Promise<void>;
  /** Aborts the COPY with this error: Postgres drops the statement's records. */
  destroy(error: Error): void;
}

export async function copyIn(query: PendingQuery<Row[]>): Promise<CopyIn> {
  const stream = await query.writable();
  let failure: Error | undefined;
  const refused = new Promise<never>((_, reject) => {
    (query as unknown as { reject: (error: Error) => void }).reject = (error) => {
      failure ??= error;
      reject(error);
    };
  });
  refused.catch(() => {});
  stream.on('error', (error: Error) => (failure ??= error));
  const check = () => {
    if (failure) throw failure;
  };
  return {
    async write(text) {
      check();
      if (!stream.write(text)) await Promise.race([once(stream, 'drain'), refused]);
      check();
    },
    async end(text = '') {
      check();
      stream.end(text);
      await Promise.race([finished(stream), refused]);
      check();
    },
    destroy(error) {
      if (!stream.destroyed) stream.destroy(error);
    },
  };
}
