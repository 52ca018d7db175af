// `npm run openapi`: writes the API reference built from the route table to openapi.json at the
// repository root. A test fails while the committed copy differs from what the table gives.
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { publishedDocumentText } from "./published.js";

const target = fileURLToPath(new URL("../../../openapi.json", import.meta.url));
writeFileSync(target, publishedDocumentText());
console.log(`wrote ${target}`);
