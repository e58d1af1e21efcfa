-- github (OpenAI-compatible): https://docs.github.com/en/github-models (base e.g. https://models.inference.ai.azure.com)
-- Defaults: model gpt-4o, temperature 0.7, max_tokens 4096; strips disable_thinking,
-- extra_body and per-message reasoning_content.
return {
  name = "github",
  version = "2.0.0",
  endpoint = "/chat/completions",
  headers = {},

  transform_request = function(raw)
    local req = compat.request(raw, { model = "gpt-4o" })
    return json.encode(req)
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
