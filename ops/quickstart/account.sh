API={{ api }}
# An account of your own: POST /auth/register answers its opaque userId and a token pair
TOKEN=$(curl -s $API/auth/register -H 'Content-Type: application/json' \
  -d '{"username": "ada", "password": "correct horse battery"}' | jq -r .access)
AUTH="Authorization: Bearer $TOKEN"
# AI analysis is off for a new account until the learner turns it on (their consent)
curl -s -X PATCH $API/ai/settings -H "$AUTH" -H 'Content-Type: application/json' \
  -d '{"aiAnalysisEnabled": true}' | jq -c '{aiAnalysisEnabled}'
curl -s $API/ai/profile -H "$AUTH" | jq -c '{userId}'
