"use strict";
// A compact Markdown renderer for chat replies that builds DOM nodes (never HTML strings), so
// model output cannot inject markup. Covers what models write: fenced code (with a light
// syntax highlighter and a copy button), headings, lists, quotes, rules, tables' rows as text,
// and inline code, bold, italic, strikethrough and http(s)/mailto links.

const Markdown = (() => {
  const KEYWORDS = new Set(("and as async await break case catch class const continue def default del do elif else " +
    "enum except export extends false finally fn for from func function go if impl import in interface is lambda " +
    "let match mut new nil none not null or pass pub raise return self static struct super switch this throw " +
    "true try type typeof var while with yield None True False local then end elseif until repeat").split(" "));
  const TOKEN = /(\/\/[^\n]*|#[^\n]*|--[^\n]*|\/\*[\s\S]*?\*\/)|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'|`(?:\\.|[^`\\])*`)|(\b\d+(?:\.\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)/g;
  const COMMENT_LANGS = {
    "#": new Set(["python", "py", "sh", "bash", "shell", "yaml", "yml", "toml", "ruby", "rb", "r", "perl", "conf", ""]),
    "--": new Set(["lua", "sql", "haskell", "hs"]),
  };

  function highlight(code, lang) {
    const out = document.createDocumentFragment();
    let last = 0;
    for (const m of code.matchAll(TOKEN)) {
      let kind = m[1] ? "comment" : m[2] ? "string" : m[3] ? "number" : KEYWORDS.has(m[4]) ? "keyword" : "";
      if (m[1] && m[1].startsWith("#") && !COMMENT_LANGS["#"].has(lang)) kind = "";
      if (m[1] && m[1].startsWith("--") && !COMMENT_LANGS["--"].has(lang)) kind = "";
      if (!kind) continue;
      if (m.index > last) out.append(code.slice(last, m.index));
      const span = document.createElement("span");
      span.className = `tok-${kind}`;
      span.textContent = m[0];
      out.append(span);
      last = m.index + m[0].length;
    }
    if (last < code.length) out.append(code.slice(last));
    return out;
  }

  function codeBlock(code, lang) {
    const wrap = document.createElement("div");
    wrap.className = "code";
    const bar = document.createElement("div");
    bar.className = "code-bar";
    const label = document.createElement("span");
    label.textContent = lang || "code";
    const copy = document.createElement("button");
    copy.type = "button";
    copy.className = "copy";
    copy.textContent = t("chat.copy");
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(code);
      } catch {
        const area = document.createElement("textarea");
        area.value = code;
        document.body.append(area);
        area.select();
        document.execCommand("copy");
        area.remove();
      }
      copy.textContent = t("chat.copied");
      setTimeout(() => { copy.textContent = t("chat.copy"); }, 1500);
    });
    bar.append(label, copy);
    const pre = document.createElement("pre");
    const el = document.createElement("code");
    el.append(highlight(code, lang.toLowerCase()));
    pre.append(el);
    wrap.append(bar, pre);
    wrap.dataset.code = code;
    return wrap;
  }

  const INLINE = /!\[([^\]]*)\]\((\/(?:files|uploads)\/[^)\s\/]+)\)|(`+)([\s\S]*?[^`])\3(?!`)|\*\*([^*]+)\*\*|__([^_]+)__|~~([^~]+)~~|\*([^*\s][^*]*)\*|\[([^\]]+)\]\(([^)\s]+)\)|(https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"])/g;

  function safeUrl(url) {
    return /^(https?:|mailto:|\/)/i.test(url) && !/^\/\//.test(url) ? url : null;
  }

  function inline(text, parent) {
    let last = 0;
    for (const m of text.matchAll(INLINE)) {
      if (m.index > last) parent.append(text.slice(last, m.index));
      let node;
      if (m[2] !== undefined) {
        // Only files this web UI serves itself are drawn inline (no tracking pixels from elsewhere).
        node = document.createElement("img");
        node.src = m[2];
        node.alt = m[1];
        node.loading = "lazy";
      }
      else if (m[4] !== undefined) { node = document.createElement("code"); node.textContent = m[4]; }
      else if (m[5] !== undefined || m[6] !== undefined) { node = document.createElement("strong"); inline(m[5] ?? m[6], node); }
      else if (m[7] !== undefined) { node = document.createElement("del"); inline(m[7], node); }
      else if (m[8] !== undefined) { node = document.createElement("em"); inline(m[8], node); }
      else {
        const href = safeUrl(m[10] ?? m[11]);
        if (href) {
          node = document.createElement("a");
          node.href = href;
          node.target = "_blank";
          node.rel = "noopener noreferrer";
          if (/^\/(files|uploads)\//.test(href)) node.className = "file";
          // A bare URL is its own text (inlining it again would match it again, without end).
          if (m[9] !== undefined) inline(m[9], node);
          else node.textContent = m[11];
        } else node = document.createTextNode(m[0]);
      }
      parent.append(node);
      last = m.index + m[0].length;
    }
    if (last < text.length) parent.append(text.slice(last));
  }

  function lines(parent, text) {
    text.split("\n").forEach((line, i) => {
      if (i) parent.append(document.createElement("br"));
      inline(line, parent);
    });
  }

  function render(source) {
    const root = document.createDocumentFragment();
    const rows = String(source ?? "").replace(/\r\n?/g, "\n").split("\n");
    let i = 0;
    const para = [];
    const flush = () => {
      if (!para.length) return;
      const p = document.createElement("p");
      lines(p, para.join("\n"));
      root.append(p);
      para.length = 0;
    };
    while (i < rows.length) {
      const row = rows[i];
      const fence = row.match(/^\s*(```+|~~~+)\s*([\w+#.-]*)/);
      if (fence) {
        flush();
        const body = [];
        i++;
        while (i < rows.length && !rows[i].trim().startsWith(fence[1])) body.push(rows[i++]);
        i++; // the closing fence (or the end of a reply still streaming)
        root.append(codeBlock(body.join("\n"), fence[2] || ""));
        continue;
      }
      const heading = row.match(/^(#{1,6})\s+(.*)$/);
      if (heading) {
        flush();
        const h = document.createElement(`h${Math.min(6, heading[1].length + 2)}`);
        inline(heading[2], h);
        root.append(h);
        i++;
        continue;
      }
      if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(row)) { flush(); root.append(document.createElement("hr")); i++; continue; }
      const item = row.match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
      if (item) {
        flush();
        const ordered = /\d/.test(item[1]);
        const list = document.createElement(ordered ? "ol" : "ul");
        if (ordered) list.start = parseInt(item[1], 10);
        while (i < rows.length) {
          const m = rows[i].match(/^\s*([-*+]|\d+[.)])\s+(.*)$/);
          if (m && /\d/.test(m[1]) === ordered) {
            const li = document.createElement("li");
            inline(m[2], li);
            list.append(li);
          } else if (rows[i].trim() && /^\s{2,}/.test(rows[i]) && list.lastChild) {
            list.lastChild.append(document.createElement("br"));
            inline(rows[i].trim(), list.lastChild);
          } else break;
          i++;
        }
        root.append(list);
        continue;
      }
      if (/^\s*>/.test(row)) {
        flush();
        const quote = [];
        while (i < rows.length && /^\s*>/.test(rows[i])) quote.push(rows[i++].replace(/^\s*>\s?/, ""));
        const block = document.createElement("blockquote");
        block.append(render(quote.join("\n")));
        root.append(block);
        continue;
      }
      if (!row.trim()) { flush(); i++; continue; }
      para.push(row);
      i++;
    }
    flush();
    return root;
  }

  return {render};
})();
