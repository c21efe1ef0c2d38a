/**
 * Calendar arithmetic in a sender's IANA time zone with Intl only: local dates, the instant of a
 * local midnight (daylight-saving changes included) and the start of the local ISO week.
 */

export interface LocalDate {
  year: number;
  month: number; // 1-12
  day: number;
}

const formatters = new Map<string, Intl.DateTimeFormat>();
function formatter(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
      weekday: 'short',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

interface LocalParts extends LocalDate {
  hour: number;
  minute: number;
  second: number;
  isoWeekday: number; // 1 = Monday
}

const weekdays: Record<string, number> = { Mon: 1, Tue: 2, Wed: 3, Thu: 4, Fri: 5, Sat: 6, Sun: 7 };

export function localParts(instant: Date, timeZone: string): LocalParts {
  const parts = Object.fromEntries(
    formatter(timeZone)
      .formatToParts(instant)
      .map((p) => [p.type, p.value]),
  );
  return {
    year: Number(parts.year),
    month: Number(parts.month),
    day: Number(parts.day),
    hour: Number(parts.hour),
    minute: Number(parts.minute),
    second: Number(parts.second),
    isoWeekday: weekdays[parts.weekday!]!,
  };
}

/** Milliseconds the zone is ahead of UTC at an instant. */
function offsetMs(instant: Date, timeZone: string): number {
  const p = localParts(instant, timeZone);
  const asUtc = Date.UTC(p.year, p.month - 1, p.day, p.hour, p.minute, p.second);
  return asUtc - (instant.getTime() - instant.getMilliseconds());
}

/** The instant a local wall-clock time happens (the later reading when a change skips it). */
export function zonedInstant(date: LocalDate, hour: number, minute: number, timeZone: string): Date {
  const wall = Date.UTC(date.year, date.month - 1, date.day, hour, minute);
  let guess = wall - offsetMs(new Date(wall), timeZone);
  guess = wall - offsetMs(new Date(guess), timeZone);
  return new Date(guess);
}

export function localDate(instant: Date, timeZone: string): LocalDate {
  const { year, month, day } = knownLocalDay(instant, timeZone)?.date ?? localParts(instant, timeZone);
  return { year, month, day };
}

export function addDays(date: LocalDate, days: number): LocalDate {
  const d = new Date(Date.UTC(date.year, date.month - 1, date.day + days));
  return { year: d.getUTCFullYear(), month: d.getUTCMonth() + 1, day: d.getUTCDate() };
}

export function formatLocalDate(date: LocalDate): string {
  return `${date.year}-${String(date.month).padStart(2, '0')}-${String(date.day).padStart(2, '0')}`;
}

/** 00:00 of the next local day: when today's usage resets. */
export function nextLocalMidnight(instant: Date, timeZone: string): Date {
  return new Date(localDay(instant, timeZone).until);
}

/** Monday of the local week containing the instant. */
export function localWeekStart(instant: Date, timeZone: string): LocalDate {
  const date = knownLocalDay(instant, timeZone)?.date;
  if (!date) {
    const parts = localParts(instant, timeZone);
    return addDays(parts, 1 - parts.isoWeekday);
  }
  // The weekday is the calendar's: a local date falls on the same weekday in every zone.
  const weekday = new Date(Date.UTC(date.year, date.month - 1, date.day)).getUTCDay() || 7;
  return addDays(date, 1 - weekday);
}

/**
 * The local day an instant falls in and the instant the next one starts, remembered per zone
 * while the clock stays inside it: every check-in asks for its sender's local date, week and next
 * midnight, and each answer costs several Intl.DateTimeFormat#formatToParts calls (about 35 µs)
 * that the same zone answers identically until midnight. Valid for instants in [from, until).
 */
interface LocalDay {
  from: number;
  until: number;
  date: LocalDate;
}
const localDays = new Map<string, LocalDay>();
const sameDate = (a: LocalDate, b: LocalDate) => a.year === b.year && a.month === b.month && a.day === b.day;

function knownLocalDay(instant: Date, timeZone: string): LocalDay | undefined {
  const t = instant.getTime();
  const known = localDays.get(timeZone);
  return known && known.from <= t && t < known.until ? known : undefined;
}

/** The local day, remembered when asked for its end (localDate alone costs no more than before). */
function localDay(instant: Date, timeZone: string): LocalDay {
  const known = knownLocalDay(instant, timeZone);
  if (known) return known;
  const t = instant.getTime();
  const { year, month, day } = localParts(instant, timeZone);
  const date = { year, month, day };
  const until = zonedInstant(addDays(date, 1), 0, 0, timeZone).getTime();
  const span = { from: t, until, date };
  // Remembered only when the span is what it claims (still this date just before `until`, the next
  // one at it): a zone whose midnight a clock change skips answers from Intl every time instead.
  if (
    until > t &&
    sameDate(localParts(new Date(until - 1), timeZone), date) &&
    sameDate(localParts(new Date(until), timeZone), addDays(date, 1))
  ) {
    if (localDays.size > 1000) localDays.clear();
    localDays.set(timeZone, span);
  }
  return span;
}
