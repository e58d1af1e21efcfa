-- compat: helpers for OpenAI-shaped payloads, available to every adapter as the global `compat`.
-- Pure Lua on top of the sandbox `json`; adapters for OpenAI-compatible vendors are a few lines
-- each because of it. Output key names follow the unified contract (REFERENCE §4.3/§4.4).
local M = {}
local json_decode, json_encode = json.decode, json.encode
local null = json.null
local mtype = math.type

local function num(v)
  if type(v) == "number" then return v end
  return nil
end

-- Usage normalised to OpenAI semantics: prompt includes cached tokens; cache_reported is true
-- whenever the vendor sent any cache field (even 0).
function M.usage(u)
  if type(u) ~= "table" then return nil end
  local out = {}
  out.prompt = num(u.prompt_tokens) or num(u.input_tokens) or 0
  out.completion = num(u.completion_tokens) or num(u.output_tokens) or 0
  local ptd = type(u.prompt_tokens_details) == "table" and u.prompt_tokens_details or nil
  local cached = ptd and num(ptd.cached_tokens)
  if cached == nil then cached = num(u.prompt_cache_hit_tokens) end
  if cached == nil then cached = num(u.cached_tokens) end
  if cached ~= nil then
    out.cache_read = cached
    out.cache_reported = true
  end
  local miss = num(u.prompt_cache_miss_tokens)
  if miss ~= nil then
    out.cache_miss = miss
    out.cache_reported = true
  elseif cached ~= nil then
    out.cache_miss = math.max(out.prompt - cached, 0)
  end
  local ctd = type(u.completion_tokens_details) == "table" and u.completion_tokens_details or nil
  local reasoning = ctd and num(ctd.reasoning_tokens)
  if reasoning ~= nil then out.reasoning_tokens = reasoning end
  out.total = num(u.total_tokens) or (out.prompt + out.completion)
  return out
end

-- Tool-call arguments: table as is; JSON string -> object; non-object -> {value=x};
-- undecodable -> {raw=s}.
function M.args(a)
  if type(a) == "table" and a ~= null then return a end
  if a == nil or a == null or a == "" then return {} end
  if type(a) ~= "string" then return { value = a } end
  local v = json_decode(a)
  if v == nil then
    if a:match("^%s*null%s*$") then return { value = null } end
    return { raw = a }
  end
  if type(v) == "table" and getmetatable(v) == nil then return v end
  return { value = v }
end

-- Non-stream tool calls: [{id,type,function{name,arguments}}] -> flat unified calls.
function M.tool_calls(list)
  if type(list) ~= "table" then return nil end
  local out, n = json.array(), 0
  for _, tc in ipairs(list) do
    local fn = type(tc["function"]) == "table" and tc["function"] or {}
    local name = fn.name or tc.name
    if type(name) == "string" and name ~= "" then
      n = n + 1
      out[n] = { id = tc.id or "", type = "function", name = name,
        arguments = M.args(fn.arguments or tc.arguments) }
    end
  end
  if n == 0 then return nil end
  return out
end

-- Stream tool-call fragments keep continuation pieces (index + arguments only).
function M.tool_fragments(list)
  if type(list) ~= "table" then return nil end
  local out, n = json.array(), 0
  for i, tc in ipairs(list) do
    local fn = type(tc["function"]) == "table" and tc["function"] or {}
    local frag = { stream_index = mtype(tc.index) and tc.index or (i - 1) }
    if type(tc.id) == "string" and tc.id ~= "" then frag.id = tc.id end
    if type(tc.type) == "string" then frag.type = tc.type end
    if type(fn.name) == "string" and fn.name ~= "" then frag.name = fn.name end
    local a = fn.arguments
    if type(a) == "string" then frag.raw_arguments = a
    elseif type(a) == "table" then frag.raw_arguments = json_encode(a) end
    n = n + 1
    out[n] = frag
  end
  if n == 0 then return nil end
  return out
end

-- Decode a vendor body, raising a clear error when it is not JSON or carries an error object.
function M.decode_body(raw, what)
  local body, err = json_decode(raw)
  if type(body) ~= "table" then
    error((what or "vendor response") .. " is not JSON: " .. tostring(err), 0)
  end
  if type(body.error) == "table" then
    local e = body.error
    local label = e.type or e.code or e.status
    error("vendor error: " .. (label and (tostring(label) .. ": ") or "")
      .. tostring(e.message or "unknown"), 0)
  elseif type(body.error) == "string" then
    error("vendor error: " .. body.error, 0)
  end
  return body
end

-- OpenAI chat.completion body -> unified response table.
function M.response(raw)
  local body = M.decode_body(raw)
  local choice = type(body.choices) == "table" and body.choices[1] or nil
  if type(choice) ~= "table" then error("response has no choices", 0) end
  local msg = type(choice.message) == "table" and choice.message or {}
  local out = {
    content = type(msg.content) == "string" and msg.content or "",
    finish_reason = type(choice.finish_reason) == "string" and choice.finish_reason or "",
    token_usage = M.usage(body.usage) or { prompt = 0, completion = 0, total = 0 },
  }
  local rc = msg.reasoning_content or msg.reasoning
  if type(rc) == "string" and rc ~= "" then out.reasoning_content = rc end
  out.tool_calls = M.tool_calls(msg.tool_calls)
  return out
end

-- One OpenAI stream frame (text after `data:`) -> unified chunk table, or nil to skip.
function M.chunk(raw)
  local body = M.decode_body(raw, "stream line")
  local out = { content = "", done = false }
  local useful = false
  local choice = type(body.choices) == "table" and body.choices[1] or nil
  if type(choice) == "table" then
    local d = type(choice.delta) == "table" and choice.delta or {}
    if type(d.content) == "string" then out.content = d.content; useful = true end
    local rc = d.reasoning_content or d.reasoning
    if type(rc) == "string" and rc ~= "" then out.reasoning_content = rc; useful = true end
    local frags = M.tool_fragments(d.tool_calls)
    if frags then out.tool_calls = frags; useful = true end
    if type(choice.finish_reason) == "string" and choice.finish_reason ~= "" then
      out.done = true
      out.finish_reason = choice.finish_reason
      useful = true
    end
    if type(choice.usage) == "table" and body.usage == nil then body.usage = choice.usage end
  end
  local usage = M.usage(body.usage)
  if usage then out.usage = usage; useful = true end
  if not useful then return nil end
  return out
end

-- Human reason from an OpenAI-style error body.
function M.error_reason(status, body)
  local b = json_decode(body or "")
  if type(b) == "table" then
    local e = b.error
    if type(e) == "table" then return "HTTP " .. tostring(status) .. ": " .. tostring(e.message or e.type) end
    if type(e) == "string" then return "HTTP " .. tostring(status) .. ": " .. e end
    if type(b.message) == "string" then return "HTTP " .. tostring(status) .. ": " .. b.message end
  end
  return "HTTP " .. tostring(status) .. ": " .. string.sub(tostring(body or ""), 1, 300)
end

-- Unified request -> table with the defaults applied and unified-only keys removed.
-- opts: {model=, temperature=, max_tokens=, keep_thinking=bool, keep_reasoning=bool}
function M.request(raw, opts)
  opts = opts or {}
  local req, err = json_decode(raw)
  if type(req) ~= "table" then error("unified request is not JSON: " .. tostring(err), 0) end
  if req.model == nil or req.model == "" or req.model == "AUTO" then req.model = opts.model end
  if req.temperature == nil then req.temperature = opts.temperature or 0.7 end
  if req.max_tokens == nil then req.max_tokens = opts.max_tokens or 4096 end
  if not opts.keep_thinking then req.disable_thinking = nil end
  req.extra_body = nil
  if type(req.messages) == "table" and not opts.keep_reasoning then
    for _, m in ipairs(req.messages) do
      if type(m) == "table" then m.reasoning_content = nil end
    end
  end
  if req.stream then req.stream_options = req.stream_options or { include_usage = true } end
  return req
end

-- Concatenate text blocks of a content value (string or block array).
function M.text_of(content)
  if type(content) == "string" then return content end
  if type(content) ~= "table" then return "" end
  local parts = {}
  for _, b in ipairs(content) do
    if type(b) == "table" and type(b.text) == "string" then parts[#parts + 1] = b.text end
  end
  return table.concat(parts, "\n")
end

-- Split a data: URL into mime type and base64 payload.
function M.data_url(url)
  if type(url) ~= "string" then return nil end
  local mime, data = url:match("^data:([^;,]+);base64,(.*)$")
  return mime, data
end

return M
