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
