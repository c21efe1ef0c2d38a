import postgres from 'postgres';

export type Sql = postgres.Sql;
/** A connection or a transaction: queries take either so callers choose the boundary. */
export type Db = postgres.Sql | postgres.TransactionSql;

export interface SqlOptions {
  max?: number;
}

/**
 * The one place connections are made. int8 comes back as a JS number: credit amounts and counts
 * stay far below 2^53, and callers compare them as numbers.
 */
export function createSql(url: string, options: SqlOptions = {}): Sql {
  return postgres(url, {
    max: options.max ?? 10,
    onnotice: () => {},
    connect_timeout: 5,
    types: {
      int8: { to: 20, from: [20], parse: (v: string) => Number(v), serialize: (v: number) => String(v) },
    },
  });
}

/**
 * A transaction body's last statements, to go out with the COMMIT: made by `commitWith` (one) or
 * `commitWithAll` (several, sent in order) and returned from the body, so by construction nothing
 * of the body can follow them. `answer` turns their rows into what the transaction answers.
 */
export class FinalStatement<T> {
  private constructor(
    readonly statements: readonly Statement[],
    readonly answer: (rows: postgres.Row[][]) => T,
  ) {}

  static of<T>(statements: readonly Statement[], answer: (rows: postgres.Row[][]) => T): FinalStatement<T> {
    return new FinalStatement(statements, answer);
  }
}

/** Any statement not sent yet, whatever its rows. */
type Statement = PromiseLike<readonly object[]> & { execute(): unknown };

/** The body's last statement, sent with the COMMIT (see `transaction`); answers its rows, or what `answer` makes of them. */
export function commitWith<R extends readonly object[]>(statement: postgres.PendingQuery<R>): FinalStatement<R>;
export function commitWith<R extends readonly object[], T>(
  statement: postgres.PendingQuery<R>,
  answer: (rows: R) => T,
): FinalStatement<T>;
export function commitWith<R extends readonly object[], T>(
  statement: postgres.PendingQuery<R>,
  answer?: (rows: R) => T,
): FinalStatement<T | R> {
  return FinalStatement.of<T | R>([statement], ([rows]) =>
    answer ? answer(rows as unknown as R) : (rows as unknown as R),
  );
}

/** The body's last statements, sent in this order with the COMMIT and no wait between them; `answer` gets each one's rows. */
export function commitWithAll<T>(
  statements: readonly Statement[],
  answer: (rows: postgres.Row[][]) => T,
): FinalStatement<T> {
  return FinalStatement.of(statements, answer);
}

/**
 * A transaction on a connection of its own, whose body may end by returning `commitWith(...)`:
 * the statements and COMMIT go out together, so the server commits the moment they are done. A
 * statement that locks a row every transaction of a workspace needs (its credit balance) then
 * holds that lock for the server's time alone, not for a round trip through this process's event
 * loop, which under load is most of a transaction's life. A failing statement turns the COMMIT
 * into a rollback and rejects. (sql.begin cannot do this: it hands its connection back to the pool
 * when it sees a COMMIT it did not send.) A body that returns anything else commits after it, as
 * sql.begin does. Use `savepoint` below, which works on either kind of transaction.
 *
 * BEGIN goes out with the body's first statement, not a round trip ahead of it: on a reserved
 * connection statements run in the order they are sent, and a BEGIN that fails (the connection
 * lost) fails everything after it.
 */
export async function transaction<T>(
  sql: Sql,
  body: (tx: postgres.ReservedSql) => Promise<T | FinalStatement<T>>,
): Promise<T> {
  const tx = await sql.reserve();
  let open = false;
  try {
    const begun = tx`begin`.execute();
    begun.catch(() => {});
    open = true;
    const ending = await body(tx);
    await begun;
    open = false;
    if (!(ending instanceof FinalStatement)) {
      await tx`commit`;
      return ending;
    }
    const commit = tx`commit`;
    // Queries go out in the order they are executed; none waits for another's answer.
    for (const statement of ending.statements) void statement.execute();
    void commit.execute();
    const settled = await Promise.allSettled<PromiseLike<readonly object[]>>([...ending.statements, commit]);
    const failed = settled.find((s) => s.status === 'rejected');
    if (failed) throw failed.reason;
    return ending.answer(settled.slice(0, -1).map((s) => (s as PromiseFulfilledResult<postgres.Row[]>).value));
  } catch (error) {
    if (open) await tx`rollback`.catch(() => {});
    throw error;
  } finally {
    tx.release();
  }
}

/**
 * `body` under a savepoint: a failure inside rolls back to it and rejects, and the transaction
 * goes on. sql.begin's transactions have their own (which must be used there: a failed query
 * inside them fails the whole transaction however it is caught); on a `transaction` above it is
 * SAVEPOINT, RELEASE and ROLLBACK TO. One fixed name serves nesting too: Postgres keeps every
 * savepoint of a name, and RELEASE and ROLLBACK TO act on the newest.
 */
export async function savepoint<T>(tx: Db, body: (sp: Db) => Promise<T>): Promise<T> {
  if ('savepoint' in tx) return tx.savepoint((sp) => body(sp)) as Promise<T>;
  await tx`savepoint nested`;
  try {
    const result = await body(tx);
    await tx`release savepoint nested`;
    return result;
  } catch (error) {
    await tx`rollback to savepoint nested`;
    throw error;
  }
}
