(set -eo pipefail  # in a subshell: the first failure stops the block with the server's error, your shell stays
API={{ api }}
KEY={{ tenant_key }}
call() { local out; out=$(curl -sS --fail-with-body "$@") || { echo "$out" >&2; return 22; }; echo "$out"; }
# 1. The models this tenant may call (an admin tenant also sees their full configs)
call $API/model/listModels -H "X-Api-Key: $KEY" | jq -c '.results[] | {modelName, maxConcurrency, queueLimit}'
# 2. Queue a call to the demo model; the answer is a task id
TASK=$(call $API/task/createTask -H "X-Api-Key: $KEY" -H 'Content-Type: application/json' \
  -d '{"modelName": "{{ model }}", "requestPayload": {"model": "deepseek-chat", "messages": [{"role": "user", "content": "Hello!"}]}}' \
  | jq -er .taskId)
# 3. Poll it until it has run (state 2 succeeded, 3 failed)
while call "$API/task/getTaskResult?taskId=$TASK" -H "X-Api-Key: $KEY" | jq -e '.state < 2' >/dev/null; do sleep 1; done
# 4. Pick it up in a batch (state 2 becomes 4, downloaded) and download the model's answer
URL=$(call $API/task/getTaskBatch -H "X-Api-Key: $KEY" -H 'Content-Type: application/json' \
  -d "$(jq -n --arg id "$TASK" '{taskIds: [$id]}')" | jq -er '.results[0].ossFile')
call "$URL" | jq -er '.choices[0].message.content'
)
