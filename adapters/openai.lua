-- OpenAI Chat Completions: https://platform.openai.com/docs/api-reference/chat
-- Pass-through: strips the unified-only keys (disable_thinking, extra_body, per-message
-- reasoning_content); streaming asks for the usage frame (stream_options.include_usage).
return {
  name = "openai",
  version = "2.0.0",
  endpoint = "/chat/completions",
  headers = {},

  transform_request = function(raw)
    return json.encode(compat.request(raw, { model = "gpt-4o-mini" }))
  end,

  transform_response = function(raw)
    return json.encode(compat.response(raw))
  end,

  transform_stream_chunk = function(line)
    local chunk = compat.chunk(line)
    if chunk == nil then return "" end
    return json.encode(chunk)
  end,

  transform_error = function(status, body)
    return compat.error_reason(status, body)
  end,
}
