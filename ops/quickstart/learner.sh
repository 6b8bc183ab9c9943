API={{ api }}
# 1. Log in as the demo learner (make run made it, with AI analysis on and a knowledge base)
TOKEN=$(curl -s $API/auth/token -H 'Content-Type: application/json' \
  -d '{"username": "{{ learner }}", "password": "{{ password }}"}' | jq -r .access)
AUTH="Authorization: Bearer $TOKEN"
# 2. Ask for an analysis of the learner ("me" names the caller), and poll it until it has finished
JOB=$(curl -s $API/ai/jobs -H "$AUTH" -H 'Content-Type: application/json' \
  -d '{"jobType": "learning_state_analysis", "targetType": "user", "targetId": "me"}' | jq -r .jobId)
until curl -s $API/ai/jobs/$JOB -H "$AUTH" | jq -e '.finishedAt or .error' >/dev/null; do sleep 1; done
curl -s $API/ai/jobs/$JOB -H "$AUTH" | jq -c '.error // {jobId, status, errorCode}'
# 3. Read its result
curl -s "$API/ai/analyses?jobId=$JOB" -H "$AUTH" | jq '.results[0] | {summary, masteryScore, level}'
# 4. Five quiz questions from the learner's knowledge base
KB=$(curl -s $API/learning/knowledge-bases -H "$AUTH" | jq -r '.results[0].id')
QUIZ=$(curl -s $API/ai/jobs -H "$AUTH" -H 'Content-Type: application/json' -d "$(jq -n --arg kb "$KB" \
  '{jobType: "quiz_generation", targetType: "knowledge_base", targetId: $kb, questionCount: 5}')" | jq -r .jobId)
until curl -s $API/ai/jobs/$QUIZ -H "$AUTH" | jq -e '.finishedAt or .error' >/dev/null; do sleep 1; done
# 5. The learner's records: what they studied, and what the AI made of it
curl -s $API/learning/study-records -H "$AUTH" | jq -c '.results[] | {knowledgePointId, isCorrect, score}'
curl -s $API/ai/quizzes -H "$AUTH" | jq -c '.results[] | {stem, answer}'
