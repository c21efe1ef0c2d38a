/**
 * Enrichment columns: a provider, its inputs mapped to the table's columns, and its output fields
 * fanned out into child columns right after it. Everything that needs the provider or the table
 * is checked here and refused with 409; the cells are filled by a run (column-runs-store.ts).
 */
import type { EnrichmentProviders } from '../../integrations/enrichment-providers/index.js';
import type { Sql } from '../../db/sql.js';
import {
  derivedOutputName,
  templateReferences,
  type EnrichmentColumnCreate,
  type StoredEnrichmentConfig,
} from '../../domain/tables/enrichments.js';
import { ApiError } from '../../domain/shared/errors.js';
import { columnsPerTable, type Column } from '../../domain/tables/tables.js';
import { loadColumns, placeColumnGroup, toColumn } from '../../store/tables/columns.js';
import { insertEnrichmentColumn, insertEnrichmentOutputColumns } from '../../store/tables/enrichments.js';
import { requireTable } from '../../store/tables/tables.js';

const conflict = (detail: string) => new ApiError('conflict', detail);
const quoted = (names: string[]) => names.map((n) => `"${n}"`).join(', ');

/** The column's settings as stored, after every check that needs only the provider. */
function configure(
  input: EnrichmentColumnCreate,
  providers: EnrichmentProviders,
): StoredEnrichmentConfig & { names: Record<string, string> } {
  const provider = providers.get(input.provider);
  if (!provider)
    throw conflict(
      `No enrichment provider "${input.provider}" is available here; GET /table-enrichments/providers/ lists those that are.`,
    );
  const info = provider.info;

  const outputNames = info.outputs.map((o) => o.name);
  const outputs = input.output_fields ? [...new Set(input.output_fields)] : outputNames;
  const unknownOutputs = outputs.filter((o) => !outputNames.includes(o));
  if (unknownOutputs.length > 0)
    throw conflict(
      `${info.display_name} has no output ${quoted(unknownOutputs)}; its outputs are ${quoted(outputNames)}.`,
    );
  const names = input.output_column_names ?? {};
  const unnamed = Object.keys(names).filter((field) => !outputs.includes(field));
  if (unnamed.length > 0)
    throw conflict(`output_column_names names ${quoted(unnamed)}, which are not among the output fields.`);

  const options = input.options ?? {};
  const optionNames = info.options.map((o) => o.name);
  const unknownOptions = Object.keys(options).filter((o) => !optionNames.includes(o));
  if (unknownOptions.length > 0) throw conflict(`${info.display_name} has no option ${quoted(unknownOptions)}.`);
  const missingOptions = info.options.filter((o) => o.required && !options[o.name]?.trim()).map((o) => o.name);
  if (missingOptions.length > 0) throw conflict(`${info.display_name} needs the option ${quoted(missingOptions)}.`);
  const tooLong = info.options.filter((o) => (options[o.name]?.length ?? 0) > o.max_length).map((o) => o.name);
  if (tooLong.length > 0) throw conflict(`The option ${quoted(tooLong)} is longer than ${info.display_name} accepts.`);

  const inputs = Object.fromEntries(Object.entries(input.input_mappings).map(([name, id]) => [name, id.toLowerCase()]));
  const declared = info.inputs.map((i) => i.name);
  if (!info.named_inputs) {
    const unknownInputs = Object.keys(inputs).filter((name) => !declared.includes(name));
    if (unknownInputs.length > 0)
      throw conflict(`${info.display_name} has no input ${quoted(unknownInputs)}; its inputs are ${quoted(declared)}.`);
  }
  const missingInputs = info.inputs.filter((i) => i.required && !Object.hasOwn(inputs, i.name)).map((i) => i.name);
  if (missingInputs.length > 0)
    throw conflict(`${info.display_name} needs the input ${quoted(missingInputs)} mapped to a column.`);
  if (info.named_inputs) {
    // A prompt or formula that reads an input nobody mapped would read nothing on every row.
    const unmapped = Object.values(options)
      .flatMap(templateReferences)
      .filter((name) => !Object.hasOwn(inputs, name));
    if (unmapped.length > 0)
      throw conflict(
        `The options refer to ${quoted([...new Set(unmapped)].map((n) => `{${n}}`))}; map a column to each in input_mappings.`,
      );
  }
  return { provider: info.key, inputs, outputs, options, names };
}

function isUniqueViolation(error: unknown) {
  return (error as { code?: string }).code === '23505';
}

export async function createEnrichmentColumn(
  sql: Sql,
  workspaceId: string,
  tableId: string,
  input: EnrichmentColumnCreate,
  providers: EnrichmentProviders,
): Promise<Column> {
  const { names, ...config } = configure(input, providers);
  try {
    return await sql.begin(async (tx) => {
      await requireTable(tx, workspaceId, tableId, 'update');
      const before = await loadColumns(tx, tableId);
      if (before.list.length + 1 + config.outputs.length > columnsPerTable) {
        throw conflict(
          `A table has at most ${columnsPerTable} columns; this one and its ${config.outputs.length} output columns do not fit.`,
        );
      }
      for (const [name, id] of Object.entries(config.inputs)) {
        const column = before.byId.get(id);
        if (!column) throw conflict(`The input "${name}" is mapped to ${id}, which is not a column of this table.`);
        if (column.kind === 'enrichment' && column.parent_column_id === null) {
          throw conflict(
            `The input "${name}" is mapped to the enrichment "${column.name}"; map one of its output columns instead.`,
          );
        }
      }
      const taken = new Set(before.list.map((c) => c.name.toLowerCase()));
      if (taken.has(input.name.toLowerCase())) throw conflict(`The table already has a column named "${input.name}".`);
      taken.add(input.name.toLowerCase());
      // A name asked for that is taken falls back to the derived one (the interface spec's rule for
      // deploying a saved agent).
      const childNames = config.outputs.map((field) => {
        let name = names[field];
        if (!name || taken.has(name.toLowerCase())) name = derivedOutputName(input.name, field);
        for (let n = 2; taken.has(name.toLowerCase()); n += 1)
          name = `${derivedOutputName(input.name, field).slice(0, 250)} (${n})`;
        taken.add(name.toLowerCase());
        return name;
      });

      const parentId = await insertEnrichmentColumn(tx, {
        workspaceId,
        tableId,
        name: input.name,
        position: before.list.length,
        config,
      });
      const children = config.outputs.map((field, n) => ({
        name: childNames[n]!,
        position: before.list.length + 1 + n,
        config: { output: field },
      }));
      const outputIds = await insertEnrichmentOutputColumns(tx, { workspaceId, tableId, parentId }, children);
      const group = [parentId, ...outputIds];
      if (input.position !== undefined) await placeColumnGroup(tx, tableId, group, input.position);
      const columns = await loadColumns(tx, tableId);
      return toColumn(columns.byId.get(parentId)!, columns);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw conflict(`The table already has a column named "${input.name}".`);
    throw error;
  }
}
