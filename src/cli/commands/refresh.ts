import { DesiredStateAuthority } from '../../activities/authority';
import { refreshDesiredUpdate } from '../../contract';
import { durationFlag, outputFormat, type OutputFlags, type OutputFormat } from '../args';
import { withTemporal, type ConnectionFlags } from '../connection';
import { checkNode, loopFor } from '../nodes';
import { print, printDocument } from '../output';
import type { CommandModule } from '../command';
import { sendUpdate } from '../updates';
import { fleetDirFrom } from '../dirs';

interface RefreshRaw extends ConnectionFlags, OutputFlags {
  node: string;
  fleet?: string;
  timeout?: string;
}

export interface RefreshInput {
  values: RefreshRaw;
  node: string;
  format: OutputFormat;
  fleetDir: string;
  timeoutMs: number;
}

/** The decisions a refresh can come to that mean it did not take. */
const REFUSED = new Set(['REFRESH_REFUSED', 'SIGNAL_REJECTED']);

export const refreshCommand: CommandModule<RefreshRaw, RefreshInput> = {
  input(values) {
    return {
      values,
      node: checkNode(values.node),
      format: outputFormat(values),
      fleetDir: fleetDirFrom(values.fleet),
      timeoutMs: values.timeout === undefined ? 30_000 : durationFlag(values.timeout, '--timeout'),
    };
  },
  async run({ values, node, format, fleetDir, timeoutMs }) {
    const read = await new DesiredStateAuthority(fleetDir).read(node);
    if (!read.ok) throw new Error(read.error);
    return await withTemporal(values, async (client) => {
      const loop = await loopFor(client, node);
      const payload = { generation: read.intent.generation, digest: read.intent.digest };
      const result = await sendUpdate(loop, refreshDesiredUpdate, payload, timeoutMs);
      const entry = result.entry ?? result.decision;
      if (format !== 'text')
        printDocument(format, {
          node,
          workflow_id: loop.workflowId,
          // `signal` kept from the signal-only days: what was sent.
          signal: payload,
          sent_as: 'update',
          entry,
          handed_over_to: result.handed_over_to,
        });
      else
        print(
          `${node}: refreshDesired generation ${payload.generation} (${payload.digest.slice(0, 19)}…) → ${entry.convergence_status} ${entry.reason}: ${entry.reason_detail}`,
        );
      return REFUSED.has(entry.reason) ? 1 : 0;
    });
  },
};
