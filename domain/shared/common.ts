import { z } from 'zod';

/** The interface spec's Errors section: the body of 401, 403, 404, 409, 429, 500, 502 and 503. */
export const DetailBodySchema = z
  .object({ detail: z.string() })
  .meta({ id: 'DetailBody', description: 'An error a person can read.' });
export type DetailBody = z.infer<typeof DetailBodySchema>;

export const ValidationIssueSchema = z
  .object({
    loc: z.array(z.string()).min(1).max(2),
    msg: z.string(),
    type: z.string(),
    input: z.unknown(),
  })
  .meta({ id: 'ValidationIssue' });
export type ValidationIssue = z.infer<typeof ValidationIssueSchema>;

/** The interface spec's Errors section: the body of 422. */
export const ValidationBodySchema = z
  .object({ detail: z.string(), issues: z.array(ValidationIssueSchema) })
  .meta({ id: 'ValidationBody', description: 'The request was understood but some values are not acceptable.' });
export type ValidationBody = z.infer<typeof ValidationBodySchema>;

export const UuidSchema = z.uuid();
/**
 * An RFC 3339 instant stored and read back whole: years 1000 to 9999 (Postgres has no year 0000, and
 * the driver reads a year below 100 back wrong or not at all) and a UTC offset of at most 15:59
 * (Postgres refuses a larger displacement). One pattern, so every client (and the fuzzer) sees the
 * bounds the server keeps; the calendar (leap days) is in it too.
 */
const yearPattern = String.raw`[1-9]\d{3}`;
const leapYearPattern = String.raw`(?:[1-9]\d(?:0[48]|[2468][048]|[13579][26])|(?:[2468][048]|[13579][26])00)`;
const monthDayPattern = String.raw`(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))`;
const timePattern = String.raw`(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:Z|[+-](?:0\d|1[0-5]):[0-5]\d)`;
const timestampPattern = new RegExp(`^(?:${leapYearPattern}-02-29|${yearPattern}-${monthDayPattern})T${timePattern}$`);
export const TimestampSchema = z
  .string()
  .regex(timestampPattern, 'must be an RFC 3339 date-time (years 1000 to 9999, a UTC offset of at most 15:59)')
  .meta({ format: 'date-time' });

/**
 * An integer query parameter: the query string carries text, so a decimal integer's digits are read
 * as the number and anything else (an empty value, `1e3`, ` 3`) is refused as not an integer, where
 * `z.coerce` would read `''` as 0. The schema documents the integer, its bounds and its default.
 */
export const queryInteger = <T extends z.ZodType<number | undefined>>(schema: T) =>
  z.preprocess((value) => (typeof value === 'string' && /^-?\d+$/.test(value) ? Number(value) : value), schema);

export const PlanSchema = z.enum(['free', 'paid']);
export type Plan = z.infer<typeof PlanSchema>;
export const RoleSchema = z.enum(['admin', 'member']);
export type Role = z.infer<typeof RoleSchema>;

/** No control characters: no one-line value has one, and Postgres cannot store one of them (NUL). */
export const noControlCharacters = /^[^\u0000-\u001f\u007f]*$/;

/** One line a machine or a person wrote (an id, a code, a URL, a title). */
export const lineSchema = (min: number, max: number) =>
  z.string().min(min).max(max).regex(noControlCharacters, 'must not contain control characters');

/** A name a person reads in a list: 1 to 255 characters, no control characters. */
export const NameSchema = lineSchema(1, 255);

/** Free text (newlines allowed); Postgres cannot store a NUL character, so the schema refuses it. */
export const textSchema = (min: number, max: number) =>
  z
    .string()
    .min(min)
    .max(max)
    .regex(/^[^\u0000]*$/, 'must not contain NUL characters');

/**
 * An email address we send from or to: a plain pattern rather than the `email` format, so every
 * client validates it the way the server does (format checkers disagree at the edges), at most
 * 254 characters (the longest a mail path allows).
 */
export const EmailAddressSchema = z
  .string()
  .max(254)
  .regex(
    /^[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+$/,
  );
