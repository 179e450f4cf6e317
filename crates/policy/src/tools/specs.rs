//! The option grammars of the programs read with `getopt_long`: which
//! options each is known to run read-only with, and which it is not.

/// A `getopt_long`-style option grammar.
pub(super) struct Spec {
    /// Short options that take no value.
    pub(super) flags: &'static str,
    /// Short options whose value is the rest of the word or the next word.
    pub(super) valued: &'static str,
    /// Short options whose value, if any, is glued (`-Lfatal`).
    pub(super) glued: &'static str,
    /// Long options, separated by blanks: `name` takes no value, `name=`
    /// one (after `=` or as the next word), `name=?` one only after `=`.
    pub(super) long: &'static str,
    /// Options that run programs or write files, with what they do
    /// (`-o`, `--output`; `+` for words starting with `+`).
    pub(super) refused: &'static [(&'static str, &'static str)],
    /// A unique prefix of a long option names it (GNU `getopt_long`).
    pub(super) abbreviations: bool,
    /// Options may follow operands (GNU argument permutation).
    pub(super) permute: bool,
    /// Long options not listed are accepted (with a value only after `=`).
    pub(super) any_long: bool,
    /// `--no-NAME` is accepted for any NAME (ripgrep's negations).
    pub(super) negations: bool,
}

pub(super) const WRITES_OUTPUT: &str = "writes its output to a file";

pub(super) const SED: Spec = Spec {
    flags: "nErsuz",
    valued: "efl",
    glued: "",
    long: "quiet silent debug expression= file= follow-symlinks line-length= posix \
        regexp-extended separate sandbox unbuffered null-data zero-terminated \
        help version",
    refused: &[
        ("-i", "edits files in place"),
        ("--in-place", "edits files in place"),
    ],
    abbreviations: true,
    permute: true,
    any_long: false,
    negations: false,
};

pub(super) const SORT: Spec = Spec {
    flags: "bdfgiMhnRrVcCmsuz",
    valued: "kSt",
    glued: "",
    long: "ignore-leading-blanks dictionary-order ignore-case general-numeric-sort \
        ignore-nonprinting month-sort human-numeric-sort numeric-sort \
        random-sort random-source= reverse sort= version-sort batch-size= \
        check=? debug files0-from= key= merge buffer-size= field-separator= \
        parallel= stable unique zero-terminated help version",
    refused: &[
        ("-o", WRITES_OUTPUT),
        ("--output", WRITES_OUTPUT),
        (
            "--compress-program",
            "runs a program to compress its temporary files",
        ),
        ("-T", "writes temporary files into a directory"),
        (
            "--temporary-directory",
            "writes temporary files into a directory",
        ),
    ],
    abbreviations: true,
    permute: true,
    any_long: false,
    negations: false,
};

pub(super) const TREE: Spec = Spec {
    flags: "adlfxqNQpugshDFvtcUriASnCXJ",
    valued: "LPIHT",
    glued: "",
    long: "gitignore gitfile= matchdirs metafirst ignore-case nolinks hintro= \
        houtro= inodes device sort= dirsfirst filesfirst filelimit= si du prune \
        charset= timefmt= fromfile fflinks info infofile= noreport version help",
    refused: &[
        ("-o", WRITES_OUTPUT),
        (
            "-R",
            "writes an HTML listing (00Tree.html) into directories",
        ),
    ],
    abbreviations: false,
    permute: true,
    any_long: false,
    negations: false,
};

pub(super) const RG: Spec = Spec {
    flags: "abcFhHiIlLnNopqsSuUvVwx0P.",
    valued: "ABCdeEfgjmMrtT",
    glued: "",
    long: "after-context= auto-hybrid-regex before-context= binary block-buffered \
        byte-offset case-sensitive color= colors= column context= \
        context-separator= count count-matches crlf debug dfa-size-limit= \
        encoding= engine= field-context-separator= field-match-separator= file= \
        files files-with-matches files-without-match fixed-strings follow \
        generate= glob= glob-case-insensitive heading help hidden \
        hyperlink-format= iglob= ignore ignore-case ignore-file= \
        ignore-file-case-insensitive include-zero invert-match json \
        line-buffered line-number line-regexp max-columns= max-columns-preview \
        max-count= max-depth= max-filesize= mmap multiline multiline-dotall null \
        null-data one-file-system only-matching passthru passthrough \
        path-separator= pcre2 pcre2-unicode pcre2-version pre-glob= pretty quiet \
        regex-size-limit= regexp= replace= smart-case sort= sort-files sortr= \
        stats stop-on-nonmatch text threads= trace trim type= type-add= \
        type-clear= type-list type-not= unicode unrestricted version vimgrep \
        with-filename word-regexp",
    refused: &[
        ("--pre", "runs a program on every file searched"),
        ("--hostname-bin", "runs a program to learn the host name"),
        ("-z", "runs decompression programs on compressed files"),
        (
            "--search-zip",
            "runs decompression programs on compressed files",
        ),
    ],
    abbreviations: false,
    permute: true,
    any_long: false,
    negations: true,
};

pub(super) const UNIQ: Spec = Spec {
    flags: "cdDiuz",
    valued: "fsw",
    glued: "",
    long: "count repeated all-repeated=? skip-fields= ignore-case skip-chars= \
        unique group=? zero-terminated check-chars= help version",
    refused: &[],
    abbreviations: true,
    permute: true,
    any_long: false,
    negations: false,
};

pub(super) const FILE: Spec = Spec {
    flags: "vzZbciklLhnN0prsd",
    valued: "mefFP",
    glued: "",
    long: "help version magic-file= uncompress uncompress-noreport brief \
        checking-printout exclude= exclude-quiet= files-from= separator= mime \
        apple extension mime-type mime-encoding keep-going list dereference \
        no-dereference no-buffer no-pad print0 preserve-date parameter= raw \
        special-files debug",
    refused: &[
        ("-C", "writes a compiled magic file"),
        ("--compile", "writes a compiled magic file"),
        ("-S", "turns off file's own system-call sandbox"),
        ("--no-sandbox", "turns off file's own system-call sandbox"),
    ],
    abbreviations: true,
    permute: true,
    any_long: false,
    negations: false,
};

const LESSKEY: &str = "reads key bindings, which can run shell commands, from a file";

pub(super) const LESS: Spec = Spec {
    flags: "aABcCdeEfFgGiIJKLmMnNqQrRsSuUVwWX~?",
    valued: "bDhjpPtTxyz#",
    glued: "",
    long: "",
    refused: &[
        ("-o", "copies its input to a log file"),
        ("-O", "copies its input to a log file"),
        ("--log-file", "copies its input to a log file"),
        ("--LOG-FILE", "copies its input to a log file"),
        ("-k", LESSKEY),
        ("--lesskey-file", LESSKEY),
        ("--lesskey-src", LESSKEY),
        ("--lesskey-content", LESSKEY),
        (
            "+",
            "runs less commands, which include shell escapes, at start",
        ),
    ],
    abbreviations: true,
    permute: true,
    any_long: true,
    negations: false,
};

pub(super) const MAN: Spec = Spec {
    flags: "acdDfFhikKlnuwWZ?",
    valued: "eELmMprRsS",
    glued: "T",
    long: "",
    refused: &[
        ("-P", "runs a pager program named on the command line"),
        ("--pager", "runs a pager program named on the command line"),
        ("-H", "runs a web browser"),
        ("--html", "runs a web browser"),
        ("--browser", "runs a web browser"),
        ("-X", "runs a viewer program"),
        ("--gxditview", "runs a viewer program"),
        (
            "-C",
            "reads a configuration file, which names the programs man runs",
        ),
        (
            "--config-file",
            "reads a configuration file, which names the programs man runs",
        ),
    ],
    abbreviations: true,
    permute: true,
    any_long: true,
    negations: false,
};

pub(super) const AWK_PROGRAM_FILE: &str = "reads the program from a file, which cannot be checked";

pub(super) const AWK: Spec = Spec {
    flags: "bcCghIMNnOPrsStVk",
    valued: "FveW",
    glued: "L",
    long: "characters-as-bytes traditional copyright gen-pot help trace bignum \
        use-lc-numeric non-decimal-data optimize posix re-interval no-optimize \
        sandbox lint-old version csv lint=? field-separator= assign= source=",
    refused: &[
        ("-f", AWK_PROGRAM_FILE),
        ("--file", AWK_PROGRAM_FILE),
        ("-E", AWK_PROGRAM_FILE),
        ("--exec", AWK_PROGRAM_FILE),
        ("-i", "includes code from a file"),
        ("--include", "includes code from a file"),
        ("-l", "loads a compiled extension"),
        ("--load", "loads a compiled extension"),
        ("-d", "writes its variables to a file"),
        ("--dump-variables", "writes its variables to a file"),
        ("-D", "starts the interactive debugger"),
        ("--debug", "starts the interactive debugger"),
        ("-o", "writes the program to a file"),
        ("--pretty-print", "writes the program to a file"),
        ("-p", "writes a profile to a file"),
        ("--profile", "writes a profile to a file"),
    ],
    abbreviations: true,
    permute: false,
    any_long: false,
    negations: false,
};
