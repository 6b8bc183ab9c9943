(set -eo pipefail  # in a subshell: the first failure stops the block with the server's error, your shell stays
API={{ api }}
call() { local out; out=$(curl -sS --fail-with-body "$@") || { echo "$out" >&2; return 22; }; echo "$out"; }
# An account of your own: POST /auth/register answers its opaque userId and a token pair
# (pasted again, it stops at the server's 400: the username is taken)
TOKEN=$(call $API/auth/register -H 'Content-Type: application/json' \
  -d '{"username": "ada", "password": "correct horse battery"}' | jq -er .access)
AUTH="Authorization: Bearer $TOKEN"
# AI analysis is off for a new account until the learner turns it on (their consent)
call -X PATCH $API/ai/settings -H "$AUTH" -H 'Content-Type: application/json' \
  -d '{"aiAnalysisEnabled": true}' | jq -c '{aiAnalysisEnabled}'
call $API/ai/profile -H "$AUTH" | jq -c '{userId}'
)
