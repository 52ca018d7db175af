import type { TestProject } from "vitest/node";
import { provideResources, testNats, testReceivers, testTemplates } from "./test-resources.js";

/**
 * The integration and slow layers' global setup: NATS, the database templates and the receivers'
 * ports, and no shared system (their files start what they need themselves).
 */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const [nats, receivers] = await Promise.all([testNats(), testReceivers()]);
  const templates = await testTemplates(receivers.webhookReceiver.certDir);
  provideResources(project, { natsUrl: nats.natsUrl, ...templates, webhookReceiver: receivers.webhookReceiver });
  return async () => {
    await nats.stop();
    await templates.drop();
    await receivers.stop();
  };
}
