-- DeepSeek (OpenAI-compatible): https://api-docs.deepseek.com/api/create-chat-completion
-- disable_thinking -> thinking = {type = "disabled"} (the body field the OpenAI SDK's
-- extra_body would carry). Usage keeps DeepSeek's prompt_cache_hit/miss_tokens.
return {
  name = "deepseek",
  version = "2.0.0",
  endpoint = "/chat/completions",
  headers = {},

  transform_request = function(raw)
    local req = compat.request(raw, { model = "deepseek-chat", keep_thinking = true })
    if req.disable_thinking then req.thinking = { type = "disabled" } end
    req.disable_thinking = nil
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
