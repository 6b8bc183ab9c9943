// The trips of tests/test_generated_typescript_client.py, through openapi-fetch typed by the types
// openapi-typescript generated from the server's /api/schema (schema.d.ts, beside this
// file when the test compiles it). Compiled with tsc --strict: every body sent and every
// field read is checked against the schema; nothing here casts or uses the any type.
// Run by node with the server and the keys in the environment; exits non-zero on the
// first thing that is not as the schema and the contract say.

import assert from "node:assert/strict";
import createClient from "openapi-fetch";
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") {
    throw new Error(`${name} is not set`);
  }
  return value;
}

const baseUrl = env("API_URL");
const suffix = env("RUN_SUFFIX");
const password = env("PASSWORD");

type Answer<T> = { data?: T; error?: unknown; response: Response };

// The body of an answer with the expected status, else the error it carried.
function expect<T>(what: string, status: number, answer: Answer<T>): T {
  if (answer.response.status !== status || answer.data === undefined) {
    throw new Error(`${what}: HTTP ${answer.response.status} ${JSON.stringify(answer.error)}`);
  }
  return answer.data;
}

// Every other field of a partial update's object is what it was.
function unchanged<T extends Record<string, unknown>>(what: string, before: T, after: T, changed: keyof T): void {
  for (const [key, value] of Object.entries(before)) {
    if (key === changed || key === "updatedAt") {
      continue;
    }
    assert.deepEqual(after[key], value, `${what}: ${key} changed`);
  }
  assert.deepEqual(Object.keys(after).sort(), Object.keys(before).sort(), `${what}: other fields`);
}

// A job's status is a union: a status the schema does not list does not compile.
function isFinal(status: Schemas["JobStatusEnum"]): boolean {
  switch (status) {
    case "pending":
    case "locked":
    case "running":
      return false;
    case "succeeded":
    case "failed":
    case "cancelled":
    case "expired":
      return true;
    default: {
      const unexpected: never = status;
      throw new Error(`unknown status ${String(unexpected)}`);
    }
  }
}

function keyMode(mode: Schemas["ApiKeyModeEnum"]): string {
  switch (mode) {
    case "platform_key":
      return "the platform's key";
    case "user_deepseek_key":
      return "the user's key";
    default: {
      const unexpected: never = mode;
      throw new Error(`unknown key mode ${String(unexpected)}`);
    }
  }
}

function targetOf(type: Schemas["TargetTypeEnum"], jobType: Schemas["JobTypeEnum"]): string {
  switch (type) {
    case "user":
    case "material":
    case "knowledge_point":
    case "knowledge_base":
      return `${jobType} on a ${type}`;
    default: {
      const unexpected: never = type;
      throw new Error(`unknown target type ${String(unexpected)}`);
    }
  }
}

const analysisOutput = {
  summary: "Steady progress with fractions.",
  masteryScore: 62,
  level: "developing",
  strengths: ["adding halves"],
  weaknesses: ["common denominators"],
  confidence: 0.8,
};

const quizOutput = {
  questions: [
    {
      questionType: "single_choice",
      stem: "What is 1/2 + 1/4?",
      options: ["3/4", "2/6", "1/8"],
      answer: "3/4",
      explanation: "Quarters: 2/4 + 1/4.",
      difficulty: "easy",
    },
  ],
};

async function learnerAndRuntime(): Promise<void> {
  const anonymous = createClient<paths>({ baseUrl });
  const health = expect("healthz", 200, await anonymous.GET("/healthz"));
  assert.equal(health.status, "ok");

  // The learner: an account, a session, consent.
  const username = `gen-ts-${suffix}`;
  const registered = expect(
    "register",
    201,
    await anonymous.POST("/auth/register", { body: { username, password } }),
  );
  const pair = expect("token", 200, await anonymous.POST("/auth/token", { body: { username, password } }));
  const rotated = expect(
    "refresh",
    200,
    await anonymous.POST("/auth/token/refresh", { body: { refresh: pair.refresh } }),
  );
  const learner = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${rotated.access}` } });
  const settings = expect(
    "settings",
    200,
    await learner.PATCH("/ai/settings", { body: { aiAnalysisEnabled: true } }),
  );
  assert.equal(settings.aiAnalysisEnabled, true);
  keyMode(settings.defaultApiKeyMode);
  const profile = expect("profile", 200, await learner.GET("/ai/profile"));
  assert.equal(profile.userId, registered.userId);

  // Learning objects, each PATCHed by one field and read back whole.
  const kb = expect(
    "knowledge base",
    201,
    await learner.POST("/learning/knowledge-bases", { body: { name: "Fractions", description: "Parts of a whole" } }),
  );
  const kbPath = { params: { path: { object_id: kb.id } } };
  expect("kb patch", 200, await learner.PATCH("/learning/knowledge-bases/{object_id}", { ...kbPath, body: { name: "Fractions II" } }));
  const kbBack = expect("kb read", 200, await learner.GET("/learning/knowledge-bases/{object_id}", kbPath));
  assert.equal(kbBack.name, "Fractions II");
  unchanged("knowledge base", kb, kbBack, "name");

  const material = expect(
    "material",
    201,
    await learner.POST("/learning/materials", {
      body: { knowledgeBaseId: kb.id, title: "Chapter 1", content: "Halves and quarters." },
    }),
  );
  const materialPath = { params: { path: { object_id: material.id } } };
  expect("material patch", 200, await learner.PATCH("/learning/materials/{object_id}", { ...materialPath, body: { title: "Chapter One" } }));
  const materialBack = expect("material read", 200, await learner.GET("/learning/materials/{object_id}", materialPath));
  assert.equal(materialBack.title, "Chapter One");
  unchanged("material", material, materialBack, "title");

  const point = expect(
    "knowledge point",
    201,
    await learner.POST("/learning/knowledge-points", {
      body: { knowledgeBaseId: kb.id, name: "Adding", description: "1/2 + 1/4" },
    }),
  );
  const pointPath = { params: { path: { object_id: point.id } } };
  expect("point patch", 200, await learner.PATCH("/learning/knowledge-points/{object_id}", { ...pointPath, body: { name: "Adding fractions" } }));
  const pointBack = expect("point read", 200, await learner.GET("/learning/knowledge-points/{object_id}", pointPath));
  assert.equal(pointBack.name, "Adding fractions");
  unchanged("knowledge point", point, pointBack, "name");

  const record = expect(
    "study record",
    201,
    await learner.POST("/learning/study-records", {
      body: { knowledgePointId: point.id, isCorrect: false, score: 40, durationSeconds: 90 },
    }),
  );
  const recordPath = { params: { path: { object_id: record.id } } };
  expect("record patch", 200, await learner.PATCH("/learning/study-records/{object_id}", { ...recordPath, body: { score: 55 } }));
  const recordBack = expect("record read", 200, await learner.GET("/learning/study-records/{object_id}", recordPath));
  assert.equal(recordBack.score, 55);
  unchanged("study record", record, recordBack, "score");
  const records = expect("records", 200, await learner.GET("/learning/study-records", { params: { query: { limit: 100 } } }));
  assert.deepEqual(records.results.map((item) => item.id), [record.id]);

  // Jobs: one for the runtime's seed path, one for its fast path, one it fails.
  async function submit(
    jobType: Schemas["JobTypeEnum"],
    targetType: Schemas["TargetTypeEnum"],
    targetId: string,
  ): Promise<Schemas["UserJob"]> {
    return expect(
      `submit ${jobType}`,
      201,
      await learner.POST("/ai/jobs", { body: { jobType, targetType, targetId, apiKeyMode: "platform_key", priority: 0 } }),
    );
  }
  // Seed 002's own body (4.2), as written: it compiles; its knowledge base kb-001 is not this
  // learner's, which the server answers as the schema documents.
  const seeded = await learner.POST("/ai/jobs", {
    body: {
      "jobType": "quiz_generation",
      "targetType": "knowledge_base",
      "targetId": "kb-001",
      "apiKeyMode": "platform_key",
      "idempotencyKey": "client-uuid-xxx",
      "questionCount": 10,
    },
  });
  assert.equal(seeded.response.status, 404);
  assert.equal(seeded.error?.error.code, "NOT_FOUND");
  assert.equal(seeded.error?.error.retryable, false);

  const analysis = await submit("learning_state_analysis", "user", "me");
  const quiz = await submit("quiz_generation", "knowledge_base", kb.id);
  const weak = await submit("weak_point_analysis", "user", "me");
  assert.equal(isFinal(analysis.status), false);
  assert.equal(targetOf(quiz.targetType, quiz.jobType), "quiz_generation on a knowledge_base");

  // The runtime, as the seeds have it: poll, lock, heartbeat, snapshot, credential, logs, result.
  const runtime = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${env("RUNTIME_TOKEN")}` } });
  const header = { "x-runtime-instance-id": `gen-ts-runtime-${suffix}` };
  const polled = expect(
    "poll",
    200,
    await runtime.POST("/internal/runtime/jobs/poll", {
      params: { header },
      body: { capabilities: ["learning_state_analysis"], limit: 10 },
    }),
  );
  assert.deepEqual(polled.jobs.map((job) => job.jobId), [analysis.jobId]);
  const seedPath = { params: { header, path: { job_id: analysis.jobId } } };
  const lock = expect("lock", 200, await runtime.POST("/internal/runtime/jobs/{job_id}/lock", seedPath));
  assert.equal(lock.status, "locked");
  const beat = expect("heartbeat", 200, await runtime.POST("/internal/runtime/jobs/{job_id}/heartbeat", seedPath));
  assert.equal(beat.cancelRequested, false);
  const snapshot = expect("snapshot", 200, await runtime.GET("/internal/runtime/jobs/{job_id}/snapshot", seedPath));
  assert.equal(snapshot.jobId, analysis.jobId);
  assert.equal(snapshot.userId, registered.userId);
  const credential = expect("credential", 200, await runtime.POST("/internal/runtime/jobs/{job_id}/credential", seedPath));
  assert.equal(keyMode(credential.apiKeyMode), "the platform's key");
  const accepted = expect(
    "invocation logs",
    201,
    await runtime.POST("/internal/runtime/jobs/{job_id}/invocation-logs", {
      ...seedPath,
      body: {
        logs: [
          {
            attemptNo: lock.attemptNo,
            provider: "deepseek",
            requestId: "r-timeout",
            totalTokens: 12,
            costCents: 0.0125,
            errorCode: "MODEL_TIMEOUT",
          },
        ],
      },
    }),
  );
  assert.equal(accepted.accepted, 1);
  const stored = expect(
    "result",
    200,
    await runtime.POST("/internal/runtime/jobs/{job_id}/result", {
      ...seedPath,
      body: {
        attemptNo: lock.attemptNo,
        output: analysisOutput,
        usage: { promptTokens: 100, completionTokens: 20 },
        costCents: 0.25,
      },
    }),
  );
  assert.equal(stored.status, "succeeded");

  // The fast path: claim with include, heartbeat, result with its logs.
  const claimed = expect(
    "claim with include",
    200,
    await runtime.POST("/internal/runtime/jobs/claim", {
      params: { header },
      body: { capabilities: ["quiz_generation"], limit: 5, include: ["snapshot", "credential"] },
    }),
  );
  const [fast] = claimed.jobs;
  if (fast === undefined || fast.snapshot === undefined || fast.credential === undefined) {
    throw new Error(`claim with include: ${JSON.stringify(claimed)}`);
  }
  assert.equal(fast.jobId, quiz.jobId);
  assert.equal(fast.status, "running");
  assert.equal(fast.snapshot.jobId, quiz.jobId);
  assert.equal(fast.snapshot.targetType, "knowledge_base");
  assert.equal(keyMode(fast.credential.apiKeyMode), "the platform's key");
  const fastPath = { params: { header, path: { job_id: fast.jobId } } };
  expect("fast heartbeat", 200, await runtime.POST("/internal/runtime/jobs/{job_id}/heartbeat", fastPath));
  const fastStored = expect(
    "fast result",
    200,
    await runtime.POST("/internal/runtime/jobs/{job_id}/result", {
      ...fastPath,
      body: {
        attemptNo: fast.attemptNo,
        output: quizOutput,
        usage: { promptTokens: 100, completionTokens: 20 },
        costCents: 0.25,
        invocationLogs: [{ attemptNo: fast.attemptNo, provider: "deepseek", requestId: "r-ok", totalTokens: 120, costCents: 0.25 }],
      },
    }),
  );
  assert.equal(fastStored.duplicate, false);

  // A claim without include, then a failure for good.
  const plainClaim = expect(
    "claim",
    200,
    await runtime.POST("/internal/runtime/jobs/claim", {
      params: { header },
      body: { capabilities: ["weak_point_analysis"], limit: 5 },
    }),
  );
  const [plain] = plainClaim.jobs;
  if (plain === undefined) {
    throw new Error("claim: no job");
  }
  assert.equal(plain.jobId, weak.jobId);
  assert.equal(plain.status, "locked");
  assert.equal(plain.snapshot, undefined);
  const failed = expect(
    "fail",
    200,
    await runtime.POST("/internal/runtime/jobs/{job_id}/fail", {
      params: { header, path: { job_id: plain.jobId } },
      body: { attemptNo: plain.attemptNo, errorCode: "INVALID_SCHEMA", errorMessage: "no such shape" },
    }),
  );
  assert.equal(failed.status, "failed");

  // The learner reads it all back.
  const jobs = expect("jobs", 200, await learner.GET("/ai/jobs"));
  assert.equal(jobs.results.length, 3);
  assert.ok(jobs.results.every((job) => isFinal(job.status)));
  const weakBack = expect("job", 200, await learner.GET("/ai/jobs/{job_id}", { params: { path: { job_id: weak.jobId } } }));
  assert.equal(weakBack.status, "failed");
  assert.equal(weakBack.errorCode, "INVALID_SCHEMA");
  const analyses = expect("analyses", 200, await learner.GET("/ai/analyses"));
  assert.deepEqual(analyses.results.map((item) => item.jobId), [analysis.jobId]);
  const quizzes = expect("quizzes", 200, await learner.GET("/ai/quizzes", { params: { query: { jobId: quiz.jobId } } }));
  assert.equal(quizzes.results.length, 1);
  const notices = expect("notifications", 200, await learner.GET("/ai/notifications"));
  assert.ok(notices.results.length >= 2);
  const after = expect("profile", 200, await learner.GET("/ai/profile"));
  assert.equal(typeof after.usage.platform_key.costCents, "number");
  assert.ok(after.usage.platform_key.tokensUsed >= 240);
}

async function tenantAndAdmin(): Promise<void> {
  const admin = createClient<paths>({ baseUrl, headers: { "X-Api-Key": env("ADMIN_TENANT_KEY") } });
  const tenant = createClient<paths>({ baseUrl, headers: { "X-Api-Key": env("TENANT_KEY") } });
  const modelName = `gen-ts-model-${suffix}`;
  const created = expect(
    "createModel",
    201,
    await admin.POST("/model/createModel", {
      body: {
        modelName,
        baseUrl: env("MODEL_BASE_URL"),
        route: "/v1/answer",
        httpMethod: "POST",
        apiKey: "API_KEY:model-secret",
        enabled: 1,
        maxConcurrency: 3,
        queueLimit: 50,
        timeoutSeconds: 60,
        retryTimes: 1,
        retryQueueMaxSeconds: 600,
        autoCleanSeconds: 3600,
        remark: "first",
      },
    }),
  );
  // Seed 003's own createModel body, as written (its baseUrl the stand-in's).
  const seededModel = expect(
    "createModel (seed 003)",
    201,
    await admin.POST("/model/createModel", {
      body: {
        "modelName": "model-service",
        "baseUrl": env("MODEL_BASE_URL"),
        "route": "/api/v1/chat",
        "httpMethod": "POST",
        "apiKey": "API_KEY:model-key,API_STATE:true,API_NUM:123",
        "enabled": 1,
        "maxConcurrency": 5,
        "queueLimit": 20,
        "timeoutSeconds": 1800,
        "retryTimes": 3,
        "retryQueueMaxSeconds": 600,
        "autoCleanSeconds": 3600,
        "remark": "Model-Service 模型服务",
      },
    }),
  );
  assert.equal(seededModel.modelName, "model-service");
  // An admin changes one field: the body names it and modelName, nothing else.
  const updated = expect("updateModel", 200, await admin.POST("/model/updateModel", { body: { modelName, remark: "second" } }));
  const back = expect("getModel", 200, await admin.GET("/model/getModel", { params: { query: { modelName } } }));
  assert.deepEqual(back, updated);
  assert.equal(back.remark, "second");
  unchanged("model config", created, back, "remark");

  // The tenant's trip: createTask, getTaskResult, getTaskBatch, the download.
  const task = expect(
    "createTask",
    201,
    await tenant.POST("/task/createTask", {
      body: { modelName, requestPayload: { question: "1/2 + 1/4?" }, bizName: "generated", creator: "" },
    }),
  );
  assert.equal(task.state, 0);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const state = expect(
      "getTaskResult",
      200,
      await tenant.GET("/task/getTaskResult", { params: { query: { taskId: task.taskId } } }),
    );
    if (state.state >= 2) {
      assert.equal(state.state, 2);
      assert.equal(state.errorMessage, null);
      break;
    }
    assert.ok(Date.now() < deadline, "the task did not run");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const batch = expect("getTaskBatch", 200, await tenant.POST("/task/getTaskBatch", { body: { taskIds: [task.taskId] } }));
  const [picked] = batch.results;
  if (picked === undefined || picked.ossFile === null) {
    throw new Error(`getTaskBatch: ${JSON.stringify(batch)}`);
  }
  assert.equal(picked.state, 4);
  const token = decodeURIComponent(new URL(picked.ossFile).pathname.split("/").pop() ?? "");
  const download = await createClient<paths>({ baseUrl }).GET("/task/download/{token}", { params: { path: { token } } });
  const body = expect("download", 200, download);
  assert.equal(download.response.headers.get("content-type"), "application/json");
  assert.deepEqual(body, { echo: { question: "1/2 + 1/4?" }, query: {} });
  const stats = expect("stats", 200, await tenant.GET("/model/stats", { params: { query: { modelName } } }));
  assert.deepEqual(stats.results.map((row) => [row.modelName, row.requestCount]), [[modelName, 1]]);
}

await learnerAndRuntime();
await tenantAndAdmin();
console.log("trips done");
