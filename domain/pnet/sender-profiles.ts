/** Sender profiles and the pnet account's settings (interface spec 2.10 Sender's channel account state). */
import { z } from 'zod';
import { NameSchema, TimestampSchema, UuidSchema } from '../shared/common.js';
import { ianaTimeZoneNames } from '../shared/time-zone-names.js';
import { LimitsSchema } from './limits.js';

export const RunModeSchema = z.enum(['manual', 'automatic']).meta({ id: 'RunMode' });
export type RunMode = z.infer<typeof RunModeSchema>;

/**
 * Every zone name this runtime reckons with: ICU's canonical names, and the IANA names it takes
 * as links (Asia/Kolkata, Europe/Kyiv, Etc/UTC), each kept as given since Intl reads them all.
 * An enum, so the OpenAPI document lists exactly what is accepted; a name this runtime's ICU
 * does not know is left out rather than accepted and failing at the first local-time sum.
 */
export const timeZones = (() => {
  const canonical = new Set(['UTC', ...Intl.supportedValuesOf('timeZone')]);
  const links = ianaTimeZoneNames.filter((name) => {
    if (canonical.has(name)) return false;
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: name });
      return true;
    } catch {
      return false;
    }
  });
  return [...canonical, ...links].sort() as [string, ...string[]];
})();

export const TimeZoneSchema = z.enum(timeZones).meta({
  id: 'TimeZone',
  description: 'IANA time zone of the sender (a link such as Asia/Kolkata is fine); daily usage resets at 00:00 there',
});

const ClockTimeSchema = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM (24-hour)');

const workingHoursDescription =
  "When metered steps may run, in the sender's time zone. An end at or before the start runs past midnight; equal start and end is the whole day.";

export const WorkingHoursSchema = z
  .object({
    start: ClockTimeSchema,
    end: ClockTimeSchema,
    days: z.array(z.int().min(1).max(7)).min(1).max(7).describe('ISO weekdays the window starts on, 1 = Monday'),
  })
  .meta({ id: 'WorkingHours', description: workingHoursDescription });

/**
 * As a request: a repeated day means nothing more, so each is kept once, in order (and only
 * then can there be at most seven).
 */
const WorkingHoursInputSchema = WorkingHoursSchema.extend({
  days: z
    .array(z.int().min(1).max(7))
    .min(1)
    .transform((days) => [...new Set(days)].sort())
    .describe('ISO weekdays the window starts on, 1 = Monday; a repeated day counts once'),
}).meta({ id: 'WorkingHoursRequest', description: workingHoursDescription });
export type WorkingHours = z.infer<typeof WorkingHoursSchema>;

export const defaultWorkingHours: WorkingHours = { start: '09:00', end: '18:00', days: [1, 2, 3, 4, 5] };

/** Seconds between metered steps; the floor keeps an account from looking automated. */
export const minActionIntervalBounds = { min: 30, max: 3600, default: 90 } as const;

export const SenderProfileCreateSchema = z
  .object({
    name: NameSchema,
    timezone: TimeZoneSchema.default('UTC'),
  })
  .meta({ id: 'SenderProfileCreate' });

export const SenderProfileSchema = z
  .object({
    id: UuidSchema,
    name: z.string(),
    timezone: z.string(),
    created_at: TimestampSchema,
    updated_at: TimestampSchema,
  })
  .meta({ id: 'SenderProfile' });
export type SenderProfile = z.infer<typeof SenderProfileSchema>;

export const SenderProfileListSchema = z
  .object({ sender_profiles: z.array(SenderProfileSchema) })
  .meta({ id: 'SenderProfileList' });

export const PnetSettingsSchema = z
  .object({
    timezone: z.string(),
    working_hours: WorkingHoursSchema,
    min_action_interval_seconds: z.int(),
    run_mode: RunModeSchema,
    resume_enabled: z.boolean(),
    attempts_enabled: z.boolean(),
    limits: LimitsSchema,
    limit_maximums: LimitsSchema,
  })
  .meta({ id: 'PnetSettings' });

export const PnetSettingsUpdateSchema = z
  .object({
    timezone: TimeZoneSchema.optional(),
    working_hours: WorkingHoursInputSchema.optional(),
    min_action_interval_seconds: z.int().min(minActionIntervalBounds.min).max(minActionIntervalBounds.max).optional(),
    run_mode: RunModeSchema.optional(),
    resume_enabled: z
      .boolean()
      .optional()
      .describe(
        'A step cut off mid-run goes back in line as `resuming` (verify first) instead of failing with `claim_expired`',
      ),
    attempts_enabled: z
      .boolean()
      .optional()
      .describe('Builds that report attempts report a run cut off without an error to the attempts endpoint'),
    limits: LimitsSchema.partial().strict().optional(),
  })
  .meta({ id: 'PnetSettingsUpdate' });
export type PnetSettingsUpdate = z.infer<typeof PnetSettingsUpdateSchema>;
