/** Credits are the unit of spend (the interface spec's What the service does), kept as a ledger of movements. */
import { z } from 'zod';
import { queryInteger, TimestampSchema, UuidSchema } from '../shared/common.js';

export const CreditMovementKindSchema = z.enum(['grant', 'hold', 'charge', 'release', 'revoke']);
export type CreditMovementKind = z.infer<typeof CreditMovementKindSchema>;

export const CreditBalanceSchema = z
  .object({
    available: z.int().describe('Credits that can be spent now'),
    held: z.int().describe('Credits set aside for operations under way'),
    spent: z.int(),
  })
  .meta({ id: 'CreditBalance' });
export type CreditBalance = z.infer<typeof CreditBalanceSchema>;

export const CreditMovementSchema = z
  .object({
    id: z.int(),
    kind: CreditMovementKindSchema,
    amount: z
      .int()
      .describe(
        'Credits moved, always positive; the kind says where (grant: into available, hold: available to held, charge: held to spent, release: held to available, revoke: taken back from available when the money that bought them was refunded or disputed)',
      ),
    hold_id: UuidSchema.nullable(),
    cause_key: z.string(),
    note: z.string().nullable(),
    created_at: TimestampSchema,
  })
  .meta({ id: 'CreditMovement' });
export type CreditMovement = z.infer<typeof CreditMovementSchema>;

export const CreditLedgerQuerySchema = z.object({
  limit: queryInteger(z.int().min(1).max(200).default(50)),
  before_id: queryInteger(z.int().min(1).optional()).describe('Return movements older than this id'),
});

export const CreditLedgerPageSchema = z
  .object({ movements: z.array(CreditMovementSchema), next_before_id: z.int().nullable() })
  .meta({ id: 'CreditLedgerPage' });

/** How long a hold may stay open before the hold's workflow releases it. */
export const defaultHoldTtlSeconds = 24 * 60 * 60;
