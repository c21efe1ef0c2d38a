/**
 * Pacing rules of a sender account, pure and deterministic (workflows, the API and the tests
 * share them): working hours, daily and weekly ceilings, the gap between metered steps, what
 * the next step waits on, and how soon a browser should check in again.
 */
import type { WorkingHours } from './sender-profiles.js';
import { addDays, localDate, zonedInstant, type LocalDate } from '../shared/zoned-time.js';

const minutesOf = (clock: string) => Number(clock.slice(0, 2)) * 60 + Number(clock.slice(3, 5));

/** The open window (if any) of one local day: [open, close) as instants. */
function windowOn(day: LocalDate, isoWeekday: number, hours: WorkingHours, timeZone: string): [Date, Date] | undefined {
  if (!hours.days.includes(isoWeekday)) return undefined;
  const start = minutesOf(hours.start);
  const end = minutesOf(hours.end);
  const open = zonedInstant(day, Math.floor(start / 60), start % 60, timeZone);
  // An end at or before the start runs past midnight; equal start and end is the whole day.
  const closeDay = end <= start ? addDays(day, 1) : day;
  const close = zonedInstant(closeDay, Math.floor(end / 60), end % 60, timeZone);
  return [open, close];
}

function isoWeekdayOf(day: LocalDate): number {
  const weekday = new Date(Date.UTC(day.year, day.month - 1, day.day)).getUTCDay();
  return weekday === 0 ? 7 : weekday;
}

/** Whether metered work may run now, and if not, when the next window opens. */
export function workingWindow(
  now: Date,
  hours: WorkingHours,
  timeZone: string,
): { open: true; closesAt: Date } | { open: false; opensAt: Date } {
  const today = localDate(now, timeZone);
  // Yesterday's window may still be open past midnight.
  for (const offset of [-1, 0]) {
    const day = addDays(today, offset);
    const window = windowOn(day, isoWeekdayOf(day), hours, timeZone);
    if (window && now >= window[0] && now < window[1]) return { open: true, closesAt: window[1] };
  }
  for (let offset = 0; offset <= 7; offset += 1) {
    const day = addDays(today, offset);
    const window = windowOn(day, isoWeekdayOf(day), hours, timeZone);
    if (window && window[0] > now) return { open: false, opensAt: window[0] };
  }
  // Unreachable with at least one day: a window opens within a week.
  throw new Error('working hours name no day');
}

export type WaitReason =
  | 'ready'
  | 'not_connected'
  | 'paused'
  | 'outside_working_hours'
  | 'daily_cap'
  | 'weekly_cap'
  | 'gap'
  | 'checkpoint'
  | 'running'
  | 'replies_check_failing';

export interface Wait {
  next_at: string | null;
  reason: WaitReason;
  resets_at: string | null;
}

/** A browser reads as active while it checks in at least this often. */
export const activeWithinSeconds = 60;

/** The longest wait a check-in answer gives: a browser checking in this often reads as active. */
export const maxPollAfterSeconds = activeWithinSeconds - 15;

/**
 * Time before the next check-in: the account's own gap at most, never so long that the browser
 * stops reading as active, and at most 15 s while work is about to run.
 */
export function pollAfterSeconds(input: {
  minActionIntervalSeconds: number;
  workSoonAt: Date | null;
  now: Date;
}): number {
  let seconds = Math.min(input.minActionIntervalSeconds, maxPollAfterSeconds);
  if (input.workSoonAt && input.workSoonAt.getTime() - input.now.getTime() <= 60_000) seconds = Math.min(seconds, 15);
  if (input.workSoonAt) {
    const untilWork = Math.ceil((input.workSoonAt.getTime() - input.now.getTime()) / 1000);
    if (untilWork > 0) seconds = Math.min(seconds, Math.max(untilWork, 1));
    else seconds = Math.min(seconds, 5);
  }
  return Math.max(1, seconds);
}
