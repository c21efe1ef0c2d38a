/** Typed keys of the search attributes in domain/search-attributes.ts, for workflows and the client. */
import { SearchAttributeType, defineSearchAttributeKey } from '@temporalio/common';

export const WorkspaceIdKey = defineSearchAttributeKey('WorkspaceId', SearchAttributeType.KEYWORD);
export const CreditHoldStatusKey = defineSearchAttributeKey('CreditHoldStatus', SearchAttributeType.KEYWORD);
export const SenderAccountIdKey = defineSearchAttributeKey('SenderAccountId', SearchAttributeType.KEYWORD);
export const StepKindKey = defineSearchAttributeKey('StepKind', SearchAttributeType.KEYWORD);
export const StepStatusKey = defineSearchAttributeKey('StepStatus', SearchAttributeType.KEYWORD);
export const StepErrorCodeKey = defineSearchAttributeKey('StepErrorCode', SearchAttributeType.KEYWORD);
export const SequenceIdKey = defineSearchAttributeKey('SequenceId', SearchAttributeType.KEYWORD);
export const ContactIdKey = defineSearchAttributeKey('ContactId', SearchAttributeType.KEYWORD);
export const ColumnRunStatusKey = defineSearchAttributeKey('ColumnRunStatus', SearchAttributeType.KEYWORD);
export const ColumnRunProgressKey = defineSearchAttributeKey('ColumnRunProgress', SearchAttributeType.INT);
