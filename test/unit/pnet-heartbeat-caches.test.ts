import { describe, expect, it } from 'vitest';
import { usageDaysAround, usageFromDays, type UsageAccount } from '../../store/pnet/account-rows.js';
import { ConnectionTokenCache, type Principal } from '../../api/plugins/auth.js';
import {
  addDays,
  formatLocalDate,
  localDate,
  localParts,
  localWeekStart,
  nextLocalMidnight,
  zonedInstant,
} from '../../domain/shared/zoned-time.js';

/** The answers as computed before the local day was remembered: straight from Intl every time. */
const reference = (instant: Date, timeZone: string) => {
  const parts = localParts(instant, timeZone);
  const date = { year: parts.year, month: parts.month, day: parts.day };
  return {
    date,
    midnight: zonedInstant(addDays(date, 1), 0, 0, timeZone),
    weekStart: addDays(date, 1 - parts.isoWeekday),
  };
};

describe('the local day remembered per time zone', () => {
  // Santiago and Havana change their clocks at midnight; Apia skipped a whole day in 2011.
  const zones = [
    'UTC',
    'Europe/Berlin',
    'America/New_York',
    'America/Santiago',
    'America/Havana',
    'Asia/Kolkata',
    'Pacific/Apia',
    'Australia/Lord_Howe',
  ];

  it('answers what Intl answers at every instant, across daylight-saving changes and midnights', () => {
    for (const zone of zones) {
      // Forward through 2011 and 2026 in uneven steps (37 min to a few hours), as a clock moves.
      for (const start of [Date.UTC(2011, 0, 1), Date.UTC(2026, 0, 1)]) {
        for (let t = start, i = 0; t < start + 366 * 86_400_000; t += (37 + ((i * 7919) % 400)) * 60_000, i += 1) {
          const instant = new Date(t);
          const want = reference(instant, zone);
          expect(nextLocalMidnight(instant, zone)).toEqual(want.midnight);
          expect(localDate(instant, zone)).toEqual(want.date);
          expect(localWeekStart(instant, zone)).toEqual(want.weekStart);
        }
      }
    }
  });

  it('is right at the last millisecond before midnight and at midnight itself, and when the clock goes back', () => {
    const zone = 'Europe/Berlin';
    const midnight = nextLocalMidnight(new Date('2026-03-28T12:00:00Z'), zone);
    expect(midnight).toEqual(new Date('2026-03-28T23:00:00Z'));
    expect(localDate(new Date(midnight.getTime() - 1), zone)).toEqual({ year: 2026, month: 3, day: 28 });
    expect(nextLocalMidnight(midnight, zone)).toEqual(new Date('2026-03-29T22:00:00Z'));
    // An earlier instant after a later one (a test clock) is answered afresh.
    expect(nextLocalMidnight(new Date('2026-03-20T12:00:00Z'), zone)).toEqual(new Date('2026-03-20T23:00:00Z'));
    expect(localWeekStart(new Date('2026-03-20T12:00:00Z'), zone)).toEqual({ year: 2026, month: 3, day: 16 });
  });
});

describe('usage from the rows around now', () => {
  const account: UsageAccount = {
    id: 'a',
    timezone: 'Pacific/Kiritimati',
    connected_at: null,
    limits: {} as UsageAccount['limits'],
  };

  it('sums today and the local week in the sender’s zone, ignoring the other days read', () => {
    // Friday 2026-11-20 12:00 UTC is Saturday 2026-11-21 02:00 in Kiritimati (UTC+14).
    const now = new Date('2026-11-20T12:00:00Z');
    const around = usageDaysAround(now);
    expect(around).toEqual({ from: '2026-11-12', to: '2026-11-28' });
    const rows = [
      { local_date: '2026-11-21', limit_kind: 'profile_view', used: 2 },
      { local_date: '2026-11-20', limit_kind: 'profile_view', used: 3 },
      { local_date: '2026-11-16', limit_kind: 'profile_view', used: 1 },
      // The week before (Sunday 15th) counts for neither.
      { local_date: '2026-11-15', limit_kind: 'profile_view', used: 50 },
      { local_date: '2026-11-21', limit_kind: 'send_message', used: 4 },
    ];
    const usage = usageFromDays(account, rows, now);
    expect(usage.find((u) => u.kind === 'profile_view')).toMatchObject({ used_today: 2, used_this_week: 6 });
    expect(usage.find((u) => u.kind === 'send_message')).toMatchObject({ used_today: 4, used_this_week: 4 });
    expect(formatLocalDate(localDate(now, account.timezone))).toBe('2026-11-21');
  });
});

describe('connection tokens remembered by the API process', () => {
  const principal = { workspaceId: 'w', accountId: 'a', via: 'connection_token' } as Principal;

  it('forgets a token after a minute or when told to', () => {
    let now = 0;
    const tokens = new ConnectionTokenCache(60_000, () => now);
    tokens.set('opc_1', principal);
    now = 59_999;
    expect(tokens.get('opc_1')).toBe(principal);
    now = 60_000;
    expect(tokens.get('opc_1')).toBeUndefined();
    tokens.set('opc_1', principal);
    tokens.forget('opc_1');
    expect(tokens.get('opc_1')).toBeUndefined();
  });
});
