(set -eo pipefail  # in a subshell: the first failure stops the block with the server's error, your shell stays
API={{ api }}
call() { local out; out=$(curl -sS --fail-with-body "$@") || { echo "$out" >&2; return 22; }; echo "$out"; }
# 1. Log in as the demo learner (make run made it, with AI analysis on and a knowledge base)
TOKEN=$(call $API/auth/token -H 'Content-Type: application/json' \
  -d '{"username": "{{ learner }}", "password": "{{ password }}"}' | jq -er .access)
AUTH="Authorization: Bearer $TOKEN"
# 2. Ask for an analysis of the learner ("me" names the caller), and poll it until it has finished
JOB=$(call $API/ai/jobs -H "$AUTH" -H 'Content-Type: application/json' \
  -d '{"jobType": "learning_state_analysis", "targetType": "user", "targetId": "me"}' | jq -er .jobId)
while call $API/ai/jobs/$JOB -H "$AUTH" | jq -e '.finishedAt == null' >/dev/null; do sleep 1; done
call $API/ai/jobs/$JOB -H "$AUTH" | jq -c '{jobId, status, errorCode}'
# 3. Read its result
call "$API/ai/analyses?jobId=$JOB" -H "$AUTH" | jq -e '.results[0] | {summary, masteryScore, level}'
# 4. Five quiz questions from the learner's knowledge base
KB=$(call $API/learning/knowledge-bases -H "$AUTH" | jq -er '.results[0].id')
QUIZ=$(call $API/ai/jobs -H "$AUTH" -H 'Content-Type: application/json' -d "$(jq -n --arg kb "$KB" \
  '{jobType: "quiz_generation", targetType: "knowledge_base", targetId: $kb, questionCount: 5}')" | jq -er .jobId)
while call $API/ai/jobs/$QUIZ -H "$AUTH" | jq -e '.finishedAt == null' >/dev/null; do sleep 1; done
# 5. The learner's records: what they studied, and what the AI made of it
call $API/learning/study-records -H "$AUTH" | jq -c '.results[] | {knowledgePointId, isCorrect, score}'
call $API/ai/quizzes -H "$AUTH" | jq -c '.results[] | {stem, answer}'
)
