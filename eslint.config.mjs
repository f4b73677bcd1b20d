// ESLint for the TypeScript and JavaScript sources: the recommended JavaScript and typescript-eslint
// rules (syntax-level, no type information: `npm run typecheck` is the type check). Names starting
// with `_` may stay unused (arguments an interface requires, rest siblings).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'build/**',
      'build-emu/**',
      'prebuilds/**',
      'coverage/**',
      'node_modules/**',
      'docs/api/**',
      '.tap/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // TypeScript resolves names; the core rule does not know Node's or the DOM's globals
      'no-undef': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        {
          argsIgnorePattern: '^_',
          varsIgnorePattern: '^_',
          caughtErrorsIgnorePattern: '^_',
          destructuredArrayIgnorePattern: '^_',
          ignoreRestSiblings: true,
        },
      ],
    },
  },
  {
    // CommonJS scripts load their dependencies with require()
    files: ['**/*.cjs'],
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
);
