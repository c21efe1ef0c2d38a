/** Holds: a paused contact or sequence keeps its steps out of every browser's line. */
import { z } from 'zod';
import { NameSchema, TimestampSchema, UuidSchema, textSchema } from '../shared/common.js';

const holdReason = textSchema(0, 500).nullable().default(null);
export const StepHoldCreateSchema = z
  .union([
    z.strictObject({ contact_key: NameSchema, reason: holdReason }),
    z.strictObject({ sequence_id: UuidSchema, reason: holdReason }),
  ])
  .meta({ id: 'PnetStepHoldCreate', description: 'Pause one contact (`contact_key`) or one sequence (`sequence_id`)' });
export type StepHoldCreate = z.infer<typeof StepHoldCreateSchema>;

export const StepHoldSchema = z
  .object({
    id: UuidSchema,
    contact_key: z.string().nullable(),
    sequence_id: UuidSchema.nullable(),
    reason: z.string().nullable(),
    created_at: TimestampSchema,
    held_steps: z.int().describe('Steps of this contact or sequence held now'),
  })
  .meta({ id: 'PnetStepHold' });
export const StepHoldListSchema = z.object({ holds: z.array(StepHoldSchema) }).meta({ id: 'PnetStepHoldList' });
export const StepHoldReleaseSchema = z
  .object({
    resumed_steps: z.int().describe('Steps back in line (or on the Tasks page); others may stay held by another hold'),
  })
  .meta({ id: 'PnetStepHoldRelease' });
