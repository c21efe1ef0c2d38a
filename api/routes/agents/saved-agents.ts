/**
 * Saved agents (interface spec: Browser agent records): create and edit them, keep examples and
 * train on them, deploy one onto a table as an agent column (interface spec: Deploy a saved agent
 * onto a table), run that column on rows, and read each research run with its steps. Runs are
 * Temporal workflows (agent-run/<column>/<row>/<run>, agent-training/<id>); everything read here
 * comes from Postgres.
 */
import { z } from 'zod';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { DetailBodySchema, queryInteger, UuidSchema, ValidationBodySchema } from '../../../domain/shared/common.js';
import { ApiError, notFound } from '../../../domain/shared/errors.js';
import {
  AgentDeploySchema,
  AgentExampleCreateSchema,
  AgentExampleListSchema,
  AgentExampleSchema,
  AgentRowsRunSchema,
  AgentRunListSchema,
  AgentRunSchema,
  SavedAgentCreateSchema,
  SavedAgentListSchema,
  SavedAgentSchema,
  SavedAgentUpdateSchema,
  TrainingRunListSchema,
  TrainingRunSchema,
  examplesPerAgentMax,
} from '../../../domain/agents/saved-agents.js';
import { ColumnSchema } from '../../../domain/tables/tables.js';
import { cancelAgentRun, startAgentRuns, startAgentTraining } from '../../../services/agents/agent-run-client.js';
import { agentRunWorkflowIds } from '../../../workflows/agents/agent-run.contract.js';
import type { AppDeps } from '../../deps.js';
import { principalOf } from '../../plugins/auth.js';
import {
  createExample,
  createSavedAgent,
  createTrainingRun,
  deleteExample,
  deleteSavedAgent,
  deployAgent,
  getAgentRun,
  getSavedAgent,
  getTrainingRun,
  goingCellRuns,
  goingRun,
  listCellRuns,
  listExamples,
  listSavedAgents,
  listTrainingRuns,
  runAgentRows,
  updateSavedAgent,
} from '../../../store/agents/saved-agents.js';

const tags = ['saved-agents'];
const AgentParamsSchema = z.object({ saved_agent_id: UuidSchema });
const ExampleParamsSchema = z.object({ saved_agent_id: UuidSchema, example_id: UuidSchema });
const TrainingParamsSchema = z.object({ saved_agent_id: UuidSchema, training_run_id: UuidSchema });
const TableParamsSchema = z.object({ table_id: UuidSchema });
const AgentColumnParamsSchema = z.object({ table_id: UuidSchema, column_id: UuidSchema });
const unprocessable = ValidationBodySchema.describe(
  'A value out of bounds (stay_on_domain without a starting URL column is one), or an input or output field the agent does not have',
);
const agentConflict = DetailBodySchema.describe(
  'The agent does not hold together: a prompt input reference to no input, two inputs of one name, two output fields of one key',
);
const limitQuery = z.object({ limit: queryInteger(z.int().min(1).max(200).default(50)) });

export const DeployedAgentSchema = z
  .object({
    column: ColumnSchema.describe('The agent column'),
    output_columns: z.array(ColumnSchema).describe('One column per output field, right after it'),
    runs: z
      .array(AgentRunSchema)
      .describe('The runs started on the first run_rows rows; empty when run_rows was omitted'),
  })
  .meta({ id: 'DeployedAgent' });

export const savedAgentRoutes =
  ({ sql, temporal, integrations: { agentSuppliers } }: AppDeps): FastifyPluginAsyncZod =>
  async (app) => {
    const modelReady = agentSuppliers.chatModel !== null;

    app.post(
      '/saved-agents/',
      {
        schema: {
          operationId: 'createSavedAgent',
          tags,
          summary: 'Save an agent: prompt template, inputs, output fields, settings (2.4), reach and MCP servers',
          description:
            'Inputs get stable ids (given or made); the prompt refers to them by id, so renaming an input never rewrites it. ' +
            'price_credits is what one run with an answer costs: `none` 1, `mcp` 2, `web` 5 (a run with web and MCP tools bills as web).',
          body: SavedAgentCreateSchema,
          response: { 201: SavedAgentSchema, 409: agentConflict, 422: unprocessable },
        },
      },
      async (request, reply) =>
        reply.code(201).send(await createSavedAgent(sql, principalOf(request).workspaceId, request.body)),
    );

    app.get(
      '/saved-agents/',
      {
        schema: {
          operationId: 'listSavedAgents',
          tags,
          summary: "The workspace's saved agents, most recently edited first",
          response: { 200: SavedAgentListSchema },
        },
      },
      async (request) => ({ agents: await listSavedAgents(sql, principalOf(request).workspaceId) }),
    );

    app.get(
      '/saved-agents/:saved_agent_id/',
      {
        schema: {
          operationId: 'readSavedAgent',
          tags,
          summary: 'A saved agent',
          params: AgentParamsSchema,
          response: { 200: SavedAgentSchema },
        },
      },
      async (request) => getSavedAgent(sql, principalOf(request).workspaceId, request.params.saved_agent_id),
    );

    app.patch(
      '/saved-agents/:saved_agent_id/',
      {
        schema: {
          operationId: 'updateSavedAgent',
          tags,
          summary: 'Edit a saved agent; every edit bumps its version',
          description:
            'Lists (inputs, output_fields, mcp_servers) and settings are replaced whole. Columns already deployed keep running the version they were deployed with.',
          params: AgentParamsSchema,
          body: SavedAgentUpdateSchema,
          response: { 200: SavedAgentSchema, 409: agentConflict, 422: unprocessable },
        },
      },
      async (request) =>
        updateSavedAgent(sql, principalOf(request).workspaceId, request.params.saved_agent_id, request.body),
    );

    app.delete(
      '/saved-agents/:saved_agent_id/',
      {
        schema: {
          operationId: 'deleteSavedAgent',
          tags,
          summary: 'Delete a saved agent with its examples and training runs; deployed columns keep working',
          params: AgentParamsSchema,
          response: { 204: z.null() },
        },
      },
      async (request, reply) => {
        if (!(await deleteSavedAgent(sql, principalOf(request).workspaceId, request.params.saved_agent_id)))
          throw notFound('Saved agent');
        return reply.code(204).send(null);
      },
    );

    // ---- examples and training

    app.post(
      '/saved-agents/:saved_agent_id/examples/',
      {
        schema: {
          operationId: 'createSavedAgentExample',
          tags,
          summary: 'Add a training example: input values by input id and the expected output by field key',
          params: AgentParamsSchema,
          body: AgentExampleCreateSchema,
          response: {
            201: AgentExampleSchema,
            409: DetailBodySchema.describe(`The agent keeps ${examplesPerAgentMax} examples already`),
            422: unprocessable,
          },
        },
      },
      // Inputs and output fields only the agent can judge are refused by the store with 422 `issues`.
      async (request, reply) =>
        reply
          .code(201)
          .send(
            await createExample(
              sql,
              principalOf(request).workspaceId,
              request.params.saved_agent_id,
              request.body,
              examplesPerAgentMax,
            ),
          ),
    );

    app.get(
      '/saved-agents/:saved_agent_id/examples/',
      {
        schema: {
          operationId: 'listSavedAgentExamples',
          tags,
          summary: "The agent's training examples, oldest first",
          params: AgentParamsSchema,
          response: { 200: AgentExampleListSchema },
        },
      },
      async (request) => ({
        examples: await listExamples(sql, principalOf(request).workspaceId, request.params.saved_agent_id),
      }),
    );

    app.delete(
      '/saved-agents/:saved_agent_id/examples/:example_id/',
      {
        schema: {
          operationId: 'deleteSavedAgentExample',
          tags,
          summary: 'Delete a training example',
          params: ExampleParamsSchema,
          response: { 204: z.null() },
        },
      },
      async (request, reply) => {
        const { saved_agent_id: agentId, example_id: exampleId } = request.params;
        if (!(await deleteExample(sql, principalOf(request).workspaceId, agentId, exampleId)))
          throw notFound('Example');
        return reply.code(204).send(null);
      },
    );

    app.post(
      '/saved-agents/:saved_agent_id/training-runs/',
      {
        schema: {
          operationId: 'startSavedAgentTraining',
          tags,
          summary: 'Run the agent on every example and score its answers per output field',
          description:
            'One research run per example (the same workflow as a row, `agent-run/<training run>/<example>`), each costing what a row does. ' +
            'Once all have ended, each field reads how many answers matched exactly and once normalised (case, spacing, trailing punctuation, number format), ' +
            'and the run compares its overall rate with the previous finished training run.',
          params: AgentParamsSchema,
          response: {
            201: TrainingRunSchema,
            409: DetailBodySchema.describe('No examples, or no chat model configured here'),
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        const { training, runs } = await createTrainingRun(
          sql,
          workspaceId,
          request.params.saved_agent_id,
          modelReady,
          agentRunWorkflowIds,
        );
        await startAgentTraining(temporal, {
          trainingRunId: training.id,
          workspaceId,
          runs,
        });
        return reply.code(201).send(training);
      },
    );

    app.get(
      '/saved-agents/:saved_agent_id/training-runs/',
      {
        schema: {
          operationId: 'listSavedAgentTrainingRuns',
          tags,
          summary: 'Training runs, newest first',
          params: AgentParamsSchema,
          querystring: limitQuery,
          response: { 200: TrainingRunListSchema },
        },
      },
      async (request) => ({
        training_runs: await listTrainingRuns(
          sql,
          principalOf(request).workspaceId,
          request.params.saved_agent_id,
          request.query.limit,
          agentRunWorkflowIds,
        ),
      }),
    );

    app.get(
      '/saved-agents/:saved_agent_id/training-runs/:training_run_id/',
      {
        schema: {
          operationId: 'readSavedAgentTrainingRun',
          tags,
          summary: 'A training run: per-field agreement and each example’s answer',
          params: TrainingParamsSchema,
          response: { 200: TrainingRunSchema },
        },
      },
      async (request) =>
        getTrainingRun(
          sql,
          principalOf(request).workspaceId,
          request.params.saved_agent_id,
          request.params.training_run_id,
          agentRunWorkflowIds,
        ),
    );

    // ---- deploy and runs

    app.post(
      '/tables/:table_id/agent-columns/',
      {
        schema: {
          operationId: 'deploySavedAgent',
          tags: [...tags, 'table-columns'],
          summary: 'Deploy a saved agent onto the table as an agent column (2.16)',
          description:
            'The agent column is followed by one output column per output field deployed (named by output_column_names; a taken name falls back to ' +
            '"<column> · <field>"). input_mappings maps agent input ids (422 when not the agent’s) to columns of this table (404 when not). ' +
            'run_rows runs the first rows right away; omitted, the column stays unrun (there is no run-all: POST …/agent-runs/ runs rows named). ' +
            'Each row holds the agent’s price when its run starts, charged only with an answer. With the table’s auto_run on, rows added later ' +
            '(one, in bulk or from a CSV; at most 1000 per add) run on their own, and keep_existing_results leaves a row whose cell holds an answer alone. ' +
            'POST …/agent-runs/cancel/ cancels the going runs.',
          params: TableParamsSchema,
          body: AgentDeploySchema,
          response: {
            201: DeployedAgentSchema,
            409: DetailBodySchema.describe(
              'A column of that name exists, the columns do not fit, or no chat model is configured here',
            ),
            422: unprocessable,
          },
        },
      },
      async (request, reply) => {
        const { workspaceId } = principalOf(request);
        const deployed = await deployAgent(
          sql,
          workspaceId,
          request.params.table_id,
          request.body,
          modelReady,
          agentRunWorkflowIds,
        );
        await startAgentRuns(temporal.client, temporal.taskQueue, workspaceId, deployed.runs);
        return reply.code(201).send(deployed);
      },
    );

    app.post(
      '/tables/:table_id/agent-columns/:column_id/agent-runs/',
      {
        schema: {
          operationId: 'runAgentColumnRows',
          tags,
          summary: 'Run an agent column on the rows named (1 to 50)',
          params: AgentColumnParamsSchema,
          body: AgentRowsRunSchema,
          response: {
            201: AgentRunListSchema,
            409: DetailBodySchema.describe('Not an agent column, a run on one of the rows is going, or no chat model'),
          },
        },
      },
      async (request, reply) => {
        const { table_id: tableId, column_id: columnId } = request.params;
        const { workspaceId } = principalOf(request);
        const runs = await runAgentRows(
          sql,
          workspaceId,
          tableId,
          columnId,
          request.body.row_ids,
          modelReady,
          agentRunWorkflowIds,
        );
        await startAgentRuns(temporal.client, temporal.taskQueue, workspaceId, runs);
        return reply.code(201).send({ runs });
      },
    );

    app.get(
      '/tables/:table_id/agent-columns/:column_id/agent-runs/',
      {
        schema: {
          operationId: 'listAgentColumnRuns',
          tags,
          summary: "The agent column's research runs with their steps, newest first",
          params: AgentColumnParamsSchema,
          querystring: limitQuery.extend({ row_id: UuidSchema.optional().describe('Only the runs on this row') }),
          response: { 200: AgentRunListSchema },
        },
      },
      async (request) => {
        const { table_id: tableId, column_id: columnId } = request.params;
        return {
          runs: await listCellRuns(
            sql,
            principalOf(request).workspaceId,
            tableId,
            columnId,
            request.query.row_id,
            request.query.limit,
          ),
        };
      },
    );

    app.post(
      '/tables/:table_id/agent-columns/:column_id/agent-runs/cancel/',
      {
        schema: {
          operationId: 'cancelAgentColumnRuns',
          tags,
          summary: "Cancel the agent column's queued and running runs",
          description:
            'Each going run stops where it stands: its cells go back to what they held before it, or become `skipped` with error "cancelled"; ' +
            'the credits it held are returned, never charged. A run that finished first keeps its answer (and its charge). ' +
            'Answers the runs that were going, as they are now; none going answers an empty list.',
          params: AgentColumnParamsSchema,
          response: { 200: AgentRunListSchema },
        },
      },
      async (request) => {
        const { table_id: tableId, column_id: columnId } = request.params;
        const { workspaceId } = principalOf(request);
        const going = await goingCellRuns(sql, workspaceId, tableId, columnId);
        for (const run of going) await cancelAgentRun(temporal.client, temporal.taskQueue, workspaceId, run);
        return { runs: await Promise.all(going.map((r) => getAgentRun(sql, workspaceId, r.id))) };
      },
    );

    app.post(
      '/agent-runs/:agent_run_id/cancel/',
      {
        schema: {
          operationId: 'cancelAgentRun',
          tags,
          summary: 'Cancel one queued or running research run',
          description:
            'The run ends `cancelled` (error "cancelled"); its cells go back to what they held before it, or become `skipped` with error "cancelled", ' +
            'and its held credits are returned. A profile read it queued and no browser has claimed yet is cancelled too.',
          params: z.object({ agent_run_id: UuidSchema }),
          response: {
            200: AgentRunSchema,
            409: DetailBodySchema.describe(
              'The run had already ended (completed, failed or cancelled); nothing changed',
            ),
          },
        },
      },
      async (request) => {
        const { workspaceId } = principalOf(request);
        const run = await goingRun(sql, workspaceId, request.params.agent_run_id);
        const status = await cancelAgentRun(temporal.client, temporal.taskQueue, workspaceId, run);
        if (status !== 'cancelled')
          throw new ApiError('conflict', `The run is already ${status === 'gone' ? 'gone' : status}; nothing changed.`);
        return getAgentRun(sql, workspaceId, run.id);
      },
    );

    app.get(
      '/agent-runs/:agent_run_id/',
      {
        schema: {
          operationId: 'readAgentRun',
          tags,
          summary:
            'A research run: status, answer, cost and every step (action, detail, duration, observation, outcome, thought)',
          params: z.object({ agent_run_id: UuidSchema }),
          response: { 200: AgentRunSchema },
        },
      },
      async (request) => getAgentRun(sql, principalOf(request).workspaceId, request.params.agent_run_id),
    );
  };
