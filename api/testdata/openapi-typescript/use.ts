// Calls the API as a TypeScript user of openapi-typescript and openapi-fetch would; it
// must type-check under tsc --strict against the types openapi-typescript generates from
// the served document (api's TestOpenAPITypeScript).
import createClient from "openapi-fetch";
import type { components, paths } from "./schema";

type Schemas = components["schemas"];

// Every field the server defaults is optional.
const reserve: Schemas["ReserveRequest"] = {};
const submission: Schemas["Submission"] = { chunks: ["a"] };
const retry: Schemas["RetryRequest"] = {};
const retryMany: Schemas["RetryManyRequest"] = {};
const fail: Schemas["FailRequest"] = { failures: [{ token: "t" }] };
// An NDJSON body is a string of lines.
const upload: paths["/v1/submissions"]["post"]["requestBody"]["content"]["application/x-ndjson"] = '{"metadata": "m"}\n"a"\n';
const results: paths["/v1/submissions/{id}/results"]["get"]["responses"][200]["content"]["application/x-ndjson"] = "";
// Error codes are an enum.
const code: Schemas["Error"]["error"]["code"] = "quota_exceeded";

export async function use(): Promise<void> {
  const client = createClient<paths>({ baseUrl: "http://localhost:3999" });
  const r = await client.POST("/v1/reserve", { body: {} });
  const chunks: Schemas["ReservedChunk"][] = r.data?.chunks ?? [];
  await client.POST("/v1/submissions", { body: submission });
  await client.POST("/v1/submissions/{id}/retry", { params: { path: { id: "1" } }, body: {} });
  await client.POST("/v1/submissions/retry", { body: {} });
  await client.POST("/v1/fail", { body: fail });
  await client.GET("/v1/submissions", {});
  await client.GET("/v1/submissions/{id}/failures", { params: { path: { id: "1" } } });
  const res = await client.GET("/v1/submissions/{id}/results", { params: { path: { id: "1" } }, parseAs: "stream" });
  const e = await client.GET("/v1/submissions/{id}", { params: { path: { id: "1" } } });
  if (e.error) {
    const c: Schemas["Error"]["error"]["code"] = e.error.error.code;
    void c;
  }
  void [reserve, retry, retryMany, upload, results, code, chunks, res];
}
