API={{ api }}
KEY={{ tenant_key }}
# 1. The models this tenant may call (an admin tenant also sees their full configs)
curl -s $API/model/listModels -H "X-Api-Key: $KEY" | jq -c '.results[] | {modelName, maxConcurrency, queueLimit}'
# 2. Queue a call to the demo model; the answer is a task id
TASK=$(curl -s $API/task/createTask -H "X-Api-Key: $KEY" -H 'Content-Type: application/json' \
  -d '{"modelName": "{{ model }}", "requestPayload": {"model": "deepseek-chat", "messages": [{"role": "user", "content": "Hello!"}]}}' \
  | jq -r .taskId)
# 3. Poll it until it has run (state 2 succeeded, 3 failed)
until curl -s "$API/task/getTaskResult?taskId=$TASK" -H "X-Api-Key: $KEY" | jq -e '.state >= 2 or .error' >/dev/null
do sleep 1; done
# 4. Pick it up in a batch (state 2 becomes 4, downloaded) and download the model's answer
URL=$(curl -s $API/task/getTaskBatch -H "X-Api-Key: $KEY" -H 'Content-Type: application/json' \
  -d "$(jq -n --arg id "$TASK" '{taskIds: [$id]}')" | jq -r '.results[0].ossFile')
curl -s "$URL" | jq -r '.choices[0].message.content'
