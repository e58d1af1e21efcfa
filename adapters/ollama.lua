-- ollama: native chat API, https://github.com/ollama/ollama/blob/main/docs/api.md#generate-a-chat-completion
-- Streaming is newline-delimited JSON (stream_format = "ndjson"), one object per line, the last
-- with done = true, done_reason and the eval counts. Tool calls: message.tool_calls with
-- object arguments; images: base64 strings in message.images.
local function usage(b)
  if b.prompt_eval_count == nil and b.eval_count == nil then return nil end
  local p, c = b.prompt_eval_count or 0, b.eval_count or 0
  return { prompt = p, completion = c, total = p + c }
end

local function finish(b, has_calls)
  if not b.done then return nil end
  local r = b.done_reason
  if r == nil or r == "" or r == "stop" then return has_calls and "tool_calls" or "stop" end
  return r
end

return {
  name = "ollama",
  version = "2.0.0",
  endpoint = "/api/chat",
  stream_format = "ndjson",
  headers = {},

  transform_request = function(raw)
    local req = json.decode(raw)
    if type(req) ~= "table" then error("unified request is not JSON", 0) end
    local msgs, names = json.array(), {}
    for _, m in ipairs(req.messages or {}) do
      local out = { role = m.role, content = compat.text_of(m.content) }
      if type(m.content) == "table" then
        local images = json.array()
        for _, b in ipairs(m.content) do
          if type(b) == "table" and b.type == "image_url" then
            local url = type(b.image_url) == "table" and b.image_url.url or b.image_url
            local _, data = compat.data_url(url)
            if data then images[#images + 1] = data end
          end
        end
        if #images > 0 then out.images = images end
      end
      if type(m.tool_calls) == "table" and #m.tool_calls > 0 then
        out.tool_calls = json.array()
        for _, tc in ipairs(m.tool_calls) do
          local fn = tc["function"] or {}
          names[tc.id or ""] = fn.name or tc.name
          out.tool_calls[#out.tool_calls + 1] = { ["function"] = { name = fn.name or tc.name,
            arguments = compat.args(fn.arguments or tc.arguments) } }
        end
      end
      if m.role == "tool" then out.tool_name = names[m.tool_call_id or ""] or m.name end
      msgs[#msgs + 1] = out
    end
    local body = {
      model = (req.model ~= nil and req.model ~= "" and req.model ~= "AUTO") and req.model or "llama3",
      messages = msgs,
      stream = req.stream and true or false,
      options = { temperature = req.temperature or 0.7, num_predict = req.max_tokens or 2048 },
    }
    if type(req.tools) == "table" and #req.tools > 0 then body.tools = req.tools end
    if req.disable_thinking then body.think = false end
    return json.encode(body)
  end,

  transform_response = function(raw)
    local b = compat.decode_body(raw)
    if type(b.message) ~= "table" then error("not an Ollama chat body (no message)", 0) end
    local calls = compat.tool_calls(b.message.tool_calls)
    local out = { content = b.message.content or "", finish_reason = finish(b, calls ~= nil) or "",
      token_usage = usage(b) or { prompt = 0, completion = 0, total = 0 } }
    if type(b.message.thinking) == "string" and b.message.thinking ~= "" then
      out.reasoning_content = b.message.thinking
    end
    out.tool_calls = calls
    return json.encode(out)
  end,

  transform_stream_chunk = function(line, state)
    state = state or {}
    local b = compat.decode_body(line, "stream line")
    local msg = type(b.message) == "table" and b.message or {}
    local out = { content = msg.content or "", done = false }
    if type(msg.thinking) == "string" and msg.thinking ~= "" then out.reasoning_content = msg.thinking end
    if type(msg.tool_calls) == "table" and #msg.tool_calls > 0 then
      out.tool_calls = json.array()
      for _, tc in ipairs(msg.tool_calls) do
        local fn = tc["function"] or {}
        local idx = state.calls or 0
        state.calls = idx + 1
        out.tool_calls[#out.tool_calls + 1] = { id = "call_" .. idx, type = "function",
          name = fn.name, raw_arguments = json.encode(compat.args(fn.arguments)),
          stream_index = idx }
      end
    end
    local fr = finish(b, (state.calls or 0) > 0)
    if fr then out.done = true; out.finish_reason = fr; out.usage = usage(b) end
    return json.encode(out)
  end,

  transform_error = function(status, body)
    return compat.error_reason(status, body)
  end,
}
