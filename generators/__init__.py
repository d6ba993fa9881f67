"""Task generators (installed as `ssmbench.generators`), one task per module.

`BUILTIN` is the single source of truth for the task registry: name -> ("module:Class", one-line summary).
Reading it imports neither numba nor any task module.
"""

BUILTIN: dict[str, tuple[str, str]] = {
    "shift": ("ssmbench.generators.shift:Shift",
              "Output the input delayed by num_shifts evenly spaced lags, one output channel per lag"),
    "cumsum": ("ssmbench.generators.cumsum:Cumsum",
               "Output the running sum of the input, scaled by 1/sqrt(i+1)"),
    "cummax": ("ssmbench.generators.cummax:Cummax", "Output the running maximum of the input"),
    "reverse": ("ssmbench.generators.reverse:Reverse",
                "Output the input sequence reversed, after L appended zeros"),
    "sort": ("ssmbench.generators.sort:Sort",
             "Output the input sorted by distance from its first element, after L appended zeros"),
    "select": ("ssmbench.generators.select:Select",
               "Copy the M marked values, in order, to the last M positions (random marks per sample)"),
    "select_fixed": ("ssmbench.generators.select_fixed:SelectFixed",
                     "Copy the M marked values, in order, to the last M positions (one fixed mark set)"),
    "solve": ("ssmbench.generators.solve:Solve",
              "Solve AX = B for X given the rows of [A | B], A a random orthogonal matrix per sample"),
    "solve_fixed": ("ssmbench.generators.solve_fixed:SolveFixed",
                    "Solve AX = B for X given the rows of [A | B], A one fixed orthogonal matrix"),
    "context_shift": ("ssmbench.generators.context_shift:ContextShift",
                      "Shift a sequence by an offset encoded in its first two values"),
    "mips": ("ssmbench.generators.mips:Mips",
             "At each position output the value whose key has the largest inner product with the query"),
    "listops_subtrees": ("ssmbench.generators.listops_subtrees:ListOpsSubtrees",
                         "Tag every closing bracket of a long ListOps expression with the value of the subexpression it closes"),
    "pathfinder": ("ssmbench.generators.pathfinder:Pathfinder",
                   "Label each pixel: on the main path with circles at both ends (2), on the other main path (1), or neither (0)"),
    "pathfinder_lra": ("ssmbench.generators.pathfinder_lra:PathfinderLRA",
                       "Say whether the two circles sit on the two ends of one dashed path (1) or not (0): LRA Pathfinder / Path-X"),
    "listops": ("ssmbench.generators.listops:ListOps",
                "Compute the value of a ListOps expression, labelled at the root's closing bracket (LRA ListOps)"),
    "mad_in_context_recall": ("ssmbench.generators.mad_in_context_recall:MadInContextRecall",
                              "MAD in-context recall: recall the value of every key seen before in the sequence"),
    "mad_fuzzy_recall": ("ssmbench.generators.mad_fuzzy_recall:MadFuzzyRecall",
                         "MAD fuzzy in-context recall: recall the value run of every key run seen before, runs of "
                         "variable length"),
    "mad_noisy_recall": ("ssmbench.generators.mad_noisy_recall:MadNoisyRecall",
                         "MAD noisy in-context recall: recall values of repeated keys among pairs of noise tokens"),
    "mad_selective_copying": ("ssmbench.generators.mad_selective_copying:MadSelectiveCopying",
                              "MAD selective copying: copy the tokens scattered among blanks, in order, after a copy "
                              "marker"),
    "mad_compression": ("ssmbench.generators.mad_compression:MadCompression",
                        "MAD compression: reproduce a random token sequence closed by a compression marker (an "
                        "autoencoder task)"),
    "mad_memorization": ("ssmbench.generators.mad_memorization:MadMemorization",
                         "MAD memorization: recall the value of each key from one fixed map shared by every sample"),
    "mqar": ("ssmbench.generators.mqar:Mqar",
             "Recall the value bound to each queried key: Zoology's multi-query associative recall (MQAR)"),
    "induction_heads": ("ssmbench.generators.induction_heads:InductionHeads",
                        "Recall the token that followed the special token's first occurrence (Mamba's induction heads)"),
    "parity_check": ("ssmbench.generators.parity_check:ParityCheck",
                     "Say whether a bit string has an odd number of 1s (Chomsky hierarchy, regular: parity_check)"),
    "even_pairs": ("ssmbench.generators.even_pairs:EvenPairs",
                   "Say whether a bit string has an odd number of unequal adjacent pairs (Chomsky hierarchy, "
                   "regular: even_pairs)"),
    "cycle_navigation": ("ssmbench.generators.cycle_navigation:CycleNavigation",
                         "Find where a walk of -1/0/+1 steps ends on a cycle of 5 (Chomsky hierarchy, regular: "
                         "cycle_navigation)"),
    "modular_arithmetic": ("ssmbench.generators.modular_arithmetic:ModularArithmetic",
                           "Reduce an expression of digits and +, -, * modulo 5 (Chomsky hierarchy, regular: "
                           "modular_arithmetic)"),
    "reverse_string": ("ssmbench.generators.reverse_string:ReverseString",
                       "Output a bit string in reverse order (Chomsky hierarchy, DCF: reverse_string)"),
    "stack_manipulation": ("ssmbench.generators.stack_manipulation:StackManipulation",
                           "Run stack instructions and output the final stack (Chomsky hierarchy, DCF: "
                           "stack_manipulation)"),
    "modular_arithmetic_brackets": ("ssmbench.generators.modular_arithmetic_brackets:ModularArithmeticBrackets",
                                    "Reduce a bracketed expression of digits and +, -, * modulo 5 (Chomsky "
                                    "hierarchy, DCF: modular_arithmetic_brackets)"),
    "solve_equation": ("ssmbench.generators.solve_equation:SolveEquation",
                       "Find the digit hidden as x in a bracketed equation modulo 5 (Chomsky hierarchy, DCF: "
                       "solve_equation)"),
    "duplicate_string": ("ssmbench.generators.duplicate_string:DuplicateString",
                         "Output a bit string twice (Chomsky hierarchy, CS: duplicate_string)"),
    "missing_duplicate_string": ("ssmbench.generators.missing_duplicate_string:MissingDuplicateString",
                                 "Find the blanked bit of a bit string written twice (Chomsky hierarchy, CS: "
                                 "missing_duplicate_string)"),
    "odds_first": ("ssmbench.generators.odds_first:OddsFirst",
                   "Output a bit string's odd-position bits, then its even-position bits (Chomsky hierarchy, CS: "
                   "odds_first)"),
    "bucket_sort": ("ssmbench.generators.bucket_sort:BucketSort",
                    "Sort a string of symbols 0..4 (Chomsky hierarchy, CS: bucket_sort)"),
    "binary_addition": ("ssmbench.generators.binary_addition:BinaryAddition",
                        "Add two little-endian binary numbers (Chomsky hierarchy, CS: binary_addition)"),
    "binary_multiplication": ("ssmbench.generators.binary_multiplication:BinaryMultiplication",
                              "Multiply two little-endian binary numbers (Chomsky hierarchy, CS: "
                              "binary_multiplication)"),
    "compute_sqrt": ("ssmbench.generators.compute_sqrt:ComputeSqrt",
                     "Compute the integer square root of a big-endian binary number (Chomsky hierarchy, CS: "
                     "compute_sqrt)"),
    "word_problem": ("ssmbench.generators.word_problem:WordProblem",
                     "Track the running product of group elements: the word problem of S5, A5, A4xZ5 or Z60 "
                     "(Illusion of State)"),
    "flipflop": ("ssmbench.generators.flipflop:FlipFlop",
                 "Output the bit of the most recent write at every read: flip-flop language modelling (Liu et al. 2023)"),
    "string_copy": ("ssmbench.generators.string_copy:StringCopy",
                    "Copy a string after a separator: Jelassi et al.'s copy task (\"Repeat After Me\")"),
    "prefix_ngram": ("ssmbench.generators.prefix_ngram:PrefixNgram",
                     "Output what follows an n-gram given before the string: Jelassi et al.'s prefix-key n-gram lookup"),
    "suffix_ngram": ("ssmbench.generators.suffix_ngram:SuffixNgram",
                     "Continue with what followed an n-gram given after the string: Jelassi et al.'s suffix-key n-gram lookup"),
    "duplicate_ngram": ("ssmbench.generators.duplicate_ngram:DuplicateNgram",
                        "Copy a string that repeats an n-gram: Jelassi et al.'s duplicate n-gram task"),
}
